"""enqueue on a kept snapshot: a refusal stands, unevaluated, until something makes room.

DESIGN section 5: an unschedulable job whose inputs have not changed is not evaluated
again each cycle. The backlog keeps its reasons, new jobs are still evaluated, and the
first change that can make room (a task ending, a node opening, a job leaving) or the
job starting to starve brings every refused job back.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.engine import ReasonCode, SchedulerConfig
from phalanx.engine.cycle import builtin_registry
from phalanx.engine.framework.extension import Vote
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo
from phalanx.engine.state import ClusterState
from tests.builders import config, make_job, make_nodes, make_queue, res


class Tally(Plugin[None]):
    """Counts, per job, how often admission asked about it; votes nothing."""

    name = "tally"
    asked: ClassVar[Counter[str]] = Counter()

    def open(self, session: Session) -> None:
        """Nothing per session."""

    def job_enqueueable(self, state: None, job: JobInfo) -> Vote:
        Tally.asked[job.name] += 1
        return Vote.ABSTAIN


REGISTRY = builtin_registry().with_plugin(Tally)
CONFIG: SchedulerConfig = config(
    ["enqueue", "allocate"],
    ["priority", "gang", ("sla", {"waitingTime": 100})],
    ["tally", "drf", "predicates", "capacity", "binpack"],
)


def _state() -> ClusterState:
    """One 8-GPU node; queue ``small`` may hold 2 GPUs and already runs 2; five 1-GPU
    jobs wait."""
    state = ClusterState(
        make_nodes(1), [make_queue("small", capability=res(cpu=64, memory_gib=256, gpu=2))]
    )
    running = make_job("running", queue="small", gpus=2, running_on=["n0"], phase=JobPhase.RUNNING)
    state.add_job(running)
    for i in range(5):  # shapes differ, so a session asks about each (not once per shape)
        waiting = make_job(f"wait{i}", queue="small", cpu=1 + i, created=i, phase=JobPhase.PENDING)
        state.add_job(waiting)
    return state


def _cycle(state: ClusterState, now: float) -> dict[str, ReasonCode]:
    Tally.asked.clear()
    decisions = state.cycle(CONFIG, now=now, registry=REGISTRY)
    reasons = {u.job: u.reason.code for u in decisions.unschedulable}
    for admitted in decisions.admitted:
        state.set_phase(admitted.job, JobPhase.QUEUED)
    return reasons


def test_a_refused_backlog_keeps_its_reasons_without_being_asked_again() -> None:
    state = _state()
    first = _cycle(state, now=1)
    assert set(Tally.asked) == {f"wait{i}" for i in range(5)}
    assert set(first.values()) == {ReasonCode.QUEUE_LIMIT}

    state.add_job(make_job("new", queue="small", created=9, phase=JobPhase.PENDING))
    second = _cycle(state, now=2)

    assert set(Tally.asked) == {"new"}  # only the newcomer is evaluated
    assert second == {**first, "new": ReasonCode.QUEUE_LIMIT}


def test_a_task_ending_brings_the_backlog_back_and_the_first_in_line_is_admitted() -> None:
    state = _state()
    _cycle(state, now=1)
    running = state.job("running").tasks[0]
    state.set_task(running, TaskPhase.SUCCEEDED, now=2)
    state.remove_job("running")

    reasons = _cycle(state, now=3)

    assert set(Tally.asked) == {f"wait{i}" for i in range(5)}
    assert state.job("wait0").phase is JobPhase.QUEUED
    assert state.job("wait1").phase is JobPhase.QUEUED
    assert set(reasons) == {"wait2", "wait3", "wait4"}  # 2 GPUs: two 1-GPU jobs fit


def test_a_node_closing_or_opening_brings_the_backlog_back() -> None:
    state = _state()
    _cycle(state, now=1)
    state.snapshot.set_schedulable(0, False)
    _cycle(state, now=2)
    assert len(Tally.asked) == 5
    _cycle(state, now=3)
    assert len(Tally.asked) == 0
    state.snapshot.set_schedulable(0, True)
    _cycle(state, now=4)
    assert len(Tally.asked) == 5


def test_a_job_that_starts_to_starve_is_evaluated_again() -> None:
    state = _state()
    _cycle(state, now=1)
    _cycle(state, now=50)
    assert len(Tally.asked) == 0

    _cycle(state, now=104)  # every wait job has waited 100 s or more: starving now (sla)

    assert len(Tally.asked) == 5


def test_a_snapshot_built_for_one_session_keeps_nothing() -> None:
    from phalanx.engine import Snapshot, run_cycle

    nodes = make_nodes(1)
    queues = [make_queue("small", capability=res(cpu=64, memory_gib=256, gpu=2))]
    jobs = [
        make_job("running", queue="small", gpus=2, running_on=["n0"], phase=JobPhase.RUNNING),
        make_job("wait", queue="small", phase=JobPhase.PENDING),
    ]
    for now in (1, 2):
        Tally.asked.clear()
        snapshot = Snapshot.build(nodes=nodes, queues=queues, jobs=jobs)
        run_cycle(snapshot, CONFIG, now=now, registry=REGISTRY)
        assert Tally.asked == Counter({"wait": 1})
