"""The determinism contract of ``framework.kept``, over many cycles of a changing cluster.

A ``ClusterState`` (one snapshot kept up to date, cycles in a fork, one ``KeptState``)
is driven through jobs arriving and leaving, decisions applied (admissions, binds,
evictions), tasks finishing and evicted tasks stopping. After every change:

1. its Decisions equal those of the same cycle on everything built afresh (a snapshot
   built from the jobs as they now are, no kept state), for configs whose learnt fgd
   target is relearnt on every change of its window (``relearn`` 1);
2. with the shipped default (fgd ``relearn`` 16: history counts, by contract 2b), a
   second ``ClusterState`` driven through the same changes decides the same (contract 1);
   and its kept target is fresh again once ``relearn`` jobs came or went.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from hypothesis import event, given
from hypothesis import strategies as st

from phalanx.domain.job import Job, JobPhase, Task, TaskPhase
from phalanx.engine import SchedulerConfig, Snapshot, default_config, run_cycle
from phalanx.engine.decisions import Decisions
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.plugins.fgd.learn import RecentJobs, learn
from phalanx.engine.snapshot import TaskStatus
from phalanx.engine.state import ClusterState
from tests.builders import make_job, make_nodes, make_queue

from .strategies import CONTENTION, worlds
from .world import CONFIGS, World, suite_settings


def _relearn_every_change(config: SchedulerConfig) -> SchedulerConfig:
    """``config`` with fgd (if any) relearning its target on every change of its window."""
    tiers = tuple(
        tuple(replace(p, args={**p.args, "relearn": 1}) if p.name == "fgd" else p for p in tier)
        for tier in config.tiers
    )
    return dataclasses.replace(config, tiers=tiers)


class _Driver:
    """A ``ClusterState`` and the jobs as domain values, changed together."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.state = ClusterState(world.nodes, world.queues)
        self.jobs: dict[str, Job] = {}

    def arrive(self, job: Job) -> None:
        """Track ``job``; its domain value records the cards its tasks on nodes were
        given (as a driver records what each bind named), so a fresh build agrees."""
        info = self.state.add_job(job)
        if info is not None:
            held = {t.name: t.gpus for t in info.tasks}
            tasks = tuple(replace(t, gpus=held[t.name(job.name)]) for t in job.all_tasks())
            job = replace(job, tasks=tasks)
        self.jobs[job.name] = job

    def leave(self, name: str) -> None:
        self.state.remove_job(name)
        del self.jobs[name]

    def set_task(self, job_name: str, task_name: str, phase: TaskPhase, **where: object) -> None:
        """Move one task in the state and in its job's domain value."""
        info = self.state.job(job_name)
        task = next(t for t in info.tasks if t.name == task_name)
        node = where.get("node")
        gpus = where.get("gpus", ())
        start = where.get("start_time")
        assert node is None or isinstance(node, str)
        assert isinstance(gpus, tuple) and (start is None or isinstance(start, float))
        self.state.set_task(task, phase, node, start_time=start, gpus=gpus)
        job = self.jobs[job_name]
        tasks = tuple(
            (
                Task(
                    role=t.role,
                    index=t.index,
                    phase=phase,
                    node=node if phase in (TaskPhase.RUNNING, TaskPhase.RELEASING) else None,
                    start_time=t.start_time if start is None else start,
                    gpus=gpus if phase is TaskPhase.RUNNING else t.gpus,
                )
                if phase is not TaskPhase.PENDING
                else Task(role=t.role, index=t.index)
            )
            if t.name(job_name) == task_name
            else t
            for t in job.all_tasks()
        )
        self.jobs[job_name] = replace(job, tasks=tasks)

    def set_phase(self, name: str, phase: JobPhase) -> None:
        self.state.set_phase(name, phase)
        self.jobs[name] = replace(self.jobs[name], phase=phase)

    def apply(self, decisions: Decisions, now: float) -> None:
        """What an executor and the lifecycle would report back: admissions, binds
        (running from ``now`` on their cards) and evictions (releasing)."""
        for admit in decisions.admitted:
            if admit.job in self.jobs and self.jobs[admit.job].phase is JobPhase.PENDING:
                self.set_phase(admit.job, JobPhase.QUEUED)
        for bind in decisions.binds:
            self.set_task(
                bind.job,
                bind.task,
                TaskPhase.RUNNING,
                node=bind.node,
                start_time=now,
                gpus=bind.gpus,
            )
            if self.jobs[bind.job].phase is not JobPhase.RUNNING:
                self.set_phase(bind.job, JobPhase.RUNNING)
        for evict in decisions.evictions:
            current = self.state.job(evict.job)
            task = next(t for t in current.tasks if t.name == evict.task)
            self.set_task(evict.job, evict.task, TaskPhase.RELEASING, node=evict.node)
            assert task.status is TaskStatus.RELEASING

    def tasks_in(self, status: TaskStatus) -> list[tuple[str, str]]:
        return sorted(
            (info.name, t.name)
            for info in self.state.snapshot.jobs.values()
            for t in info.tasks
            if t.status is status
        )

    def fresh(self, config: SchedulerConfig, now: float) -> Decisions:
        """The cycle on everything built afresh from the jobs as they are now."""
        snapshot = Snapshot.build(
            nodes=self.world.nodes, queues=self.world.queues, jobs=list(self.jobs.values())
        )
        return run_cycle(snapshot, config, now=now)


def _change(driver: _Driver, data: st.DataObject, last: Decisions, now: float) -> str:
    """One drawn change to the cluster; its name."""
    waiting = [j for j in driver.world.jobs if j.name not in driver.jobs]
    kinds = ["apply", "finish", "stop", "leave", *(["arrive"] if waiting else [])]
    kind = data.draw(st.sampled_from(kinds), label="change")
    if kind == "arrive":
        driver.arrive(data.draw(st.sampled_from(waiting), label="arrives"))
    elif kind == "leave" and driver.jobs:
        driver.leave(data.draw(st.sampled_from(sorted(driver.jobs)), label="leaves"))
    elif kind == "apply":
        driver.apply(last, now)
    elif kind == "finish" and (running := driver.tasks_in(TaskStatus.RUNNING)):
        job, task = data.draw(st.sampled_from(running), label="finishes")
        driver.set_task(job, task, TaskPhase.SUCCEEDED)
    elif kind == "stop" and (releasing := driver.tasks_in(TaskStatus.RELEASING)):
        job, task = data.draw(st.sampled_from(releasing), label="stops")
        driver.set_task(job, task, TaskPhase.PENDING)
    else:
        return "nothing"
    return kind


@suite_settings(60)
@given(world=st.one_of(worlds(max_jobs=10), worlds(mix=CONTENTION, max_jobs=10)), data=st.data())
def test_a_kept_state_decides_as_a_fresh_build_over_many_cycles(
    world: World, data: st.DataObject
) -> None:
    config = _relearn_every_change(world.config)
    driver = _Driver(world)
    for job in world.jobs[: data.draw(st.integers(0, len(world.jobs)), label="at start")]:
        driver.arrive(job)
    last = driver.state.cycle(config, now=world.now)
    for step in range(1, data.draw(st.integers(2, 12), label="cycles")):
        now = world.now + step
        epoch = driver.state.snapshot.epoch
        event(f"change: {_change(driver, data, last, now)}")
        last = driver.state.cycle(config, now=now)
        fresh = driver.fresh(config, now)
        why = "\n".join([f"cycle {step}: a kept state decides otherwise", world.describe()])
        if driver.state.snapshot.epoch != epoch:
            assert last == fresh, why
        else:  # refusals stand, with the wording they were given then (contract 2a)
            assert _verdicts(last) == _verdicts(fresh), why


def _verdicts(decisions: Decisions) -> Decisions:
    """``decisions`` with the reasons' wording left out (who is unschedulable, and why
    by code, is kept)."""
    return replace(
        decisions,
        unschedulable=tuple(
            replace(u, reason=replace(u.reason, message="")) for u in decisions.unschedulable
        ),
    )


@suite_settings(20)
@given(world=worlds(configs=("default",), max_jobs=10), data=st.data())
def test_the_same_changes_give_the_same_decisions_with_the_shipped_default(
    world: World, data: st.DataObject
) -> None:
    config = CONFIGS["default"]
    drivers = (_Driver(world), _Driver(world))
    for job in world.jobs:
        for driver in drivers:
            driver.arrive(job)
    last = [d.state.cycle(config, now=world.now) for d in drivers]
    assert last[0] == last[1]
    for step in range(1, data.draw(st.integers(2, 8), label="cycles")):
        now = world.now + step
        leaving = data.draw(st.sampled_from(["", *sorted(drivers[0].jobs)]), label="leaves")
        for driver in drivers:
            if leaving:
                driver.leave(leaving)
            else:
                driver.apply(last[0], now)
        last = [d.state.cycle(config, now=now) for d in drivers]
        assert last[0] == last[1], f"cycle {step}: one history, two decisions"


def test_fgds_kept_target_is_at_most_relearn_minus_one_changes_old() -> None:
    relearn, window = 3, 100
    config = replace(
        default_config(),
        tiers=tuple(
            tuple(
                replace(p, args={**p.args, "relearn": relearn, "window": window})
                if p.name == "fgd"
                else p
                for p in tier
            )
            for tier in default_config().tiers
        ),
    )
    fgd = next(p for tier in config.tiers for p in tier if p.name == "fgd")
    coverage = float(fgd.args.get("coverage", 0.9))
    state = ClusterState(make_nodes(4), [make_queue()])
    for i in range(4):
        state.add_job(make_job(f"one-{i}", gpus=1, created=float(i), phase=JobPhase.PENDING))
    state.cycle(config, now=10.0)  # learns a target of one-GPU tasks

    def targets() -> tuple[object, object]:
        """The target the kept state's fgd reads, and the one a fresh build learns."""
        kept = state.kept.get(RecentJobs, Lifetime.FOLLOWS, window, follow=True)
        snapshot = state.snapshot
        return tuple(  # type: ignore[return-value]
            None if t is None else (t.shapes, t.popularity.tolist())
            for t in (
                learn(snapshot, window, coverage, memory=True, recent=kept, relearn=relearn),
                learn(snapshot, window, coverage, memory=True),
            )
        )

    for i in range(relearn):
        kept, fresh = targets()
        assert (kept == fresh) is (i == 0), f"after {i} arrivals"
        state.add_job(make_job(f"eight-{i}", gpus=8, created=10.0 + i, phase=JobPhase.PENDING))
    kept, fresh = targets()
    assert kept == fresh  # relearn arrivals: learnt again
