"""A deterministic multi-cycle driver for scenarios, on the one lifecycle.

``World`` drives ``phalanx.engine.lifecycle.Lifecycle`` as the control plane and the
simulator do, with an executor that acts at once: a start is STARTED and a stop is
EXITED (stopped) in the same instant. ``step(now)`` first ends the tasks whose run is
over by ``now`` (each exits with code 0 at ``start_time + runtime``), then runs one
session and hands its Decisions to the lifecycle. So evictions, gang restarts,
re-admission and success follow the production rules, not a test's own copy of them.

A task runs for ``runtimes[job]``, else the job's walltime, else its runtime estimate,
else forever. No clock is read.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from phalanx.domain.job import Job, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine import Decisions, SchedulerConfig
from phalanx.engine.lifecycle import (
    Effect,
    Lifecycle,
    Start,
    Stop,
    TaskEvent,
    TaskEventKind,
)
from phalanx.engine.snapshot import TaskStatus
from phalanx.engine.state import ClusterState

ON_NODE = (TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.RELEASING)


@dataclass
class World:
    """Nodes, queues and the lifecycle of the jobs submitted to them."""

    nodes: Sequence[Node]
    queues: Sequence[Queue]
    config: SchedulerConfig
    runtimes: dict[str, float] = field(default_factory=dict)
    history: list[tuple[float, Decisions]] = field(default_factory=list)
    life: Lifecycle = field(init=False)

    def __post_init__(self) -> None:
        self.life = Lifecycle(ClusterState(self.nodes, self.queues))

    def submit(self, *jobs: Job, runtime: float | None = None) -> None:
        """Add jobs (names must be new); ``runtime`` overrides walltime as the true run time."""
        for job in jobs:
            assert job.name not in self.life.jobs, f"job {job.name} submitted twice"
            if runtime is not None:
                self.runtimes[job.name] = runtime
            self._carry_out(self.life.submit(job, now=job.creation_time))

    def runtime(self, job: Job) -> float:
        """How long each of ``job``'s tasks really runs."""
        if job.name in self.runtimes:
            return self.runtimes[job.name]
        if job.walltime is not None:
            return job.walltime
        return job.runtime_estimate if job.runtime_estimate is not None else math.inf

    def step(self, now: float) -> Decisions:
        """End what ended by ``now``, run one session at ``now`` and apply its Decisions."""
        self.retire(now)
        self._carry_out(self.life.advance(now=now))
        decisions = self.life.state.cycle(self.config, now=now)
        self._carry_out(self.life.apply(decisions, now=now))
        self.history.append((now, decisions))
        return decisions

    def run(self, times: Iterable[float]) -> list[Decisions]:
        """``step`` at each time, in order."""
        return [self.step(t) for t in times]

    def retire(self, now: float) -> None:
        """Every running task whose run is over by ``now`` exits with code 0, in time order."""
        ends = []
        for name in sorted(self.life.jobs):
            life = self.life.jobs[name]
            runtime = self.runtime(life.job)
            for task in self.life.tasks(life):
                end = (task.start_time or 0.0) + runtime
                if task.status is TaskStatus.RUNNING and end <= now:
                    ends.append((end, name, task.name, task.node))
        nodes = self.life.state.snapshot.nodes
        for end, job, task, node in sorted(ends):
            exited = TaskEvent(
                kind=TaskEventKind.EXITED,
                time=end,
                job=job,
                task=task,
                node=nodes[node].name,
                exit_code=0,
            )
            self._carry_out(self.life.on_event(exited, now=end))

    # -- views --------------------------------------------------------------------------

    @property
    def jobs(self) -> dict[str, Job]:
        """Every live job as the engine holds it now (spec, phase and task states)."""
        return {
            name: self.life.current(life) if life.in_state else life.job
            for name, life in self.life.jobs.items()
        }

    def placed(self, job: str) -> list[str]:
        """Nodes of ``job``'s tasks that hold a node, in task order."""
        found = self.jobs.get(job)
        if found is None:
            return []
        return [t.node for t in found.all_tasks() if t.phase in ON_NODE and t.node is not None]

    def used(self, queue: str, resource: str = "gpu") -> float:
        """How much of ``resource`` the tasks of ``queue``'s jobs hold on nodes."""
        total = 0.0
        for job in self.jobs.values():
            if job.queue != queue:
                continue
            per_task = {role.name: role.resources.get(resource) for role in job.roles}
            total += sum(per_task[t.role] for t in job.all_tasks() if t.phase in ON_NODE)
        return total

    def evictions_per_task(self) -> Counter[str]:
        """How many times each task was evicted so far."""
        return Counter(e.task for _, d in self.history for e in d.evictions)

    def eviction_count(self) -> int:
        """Evictions over every cycle so far."""
        return sum(len(d.evictions) for _, d in self.history)

    # -- the executor that acts at once ---------------------------------------------------

    def _carry_out(self, effects: list[Effect]) -> None:
        pending: deque[Effect] = deque(effects)
        while pending:
            effect = pending.popleft()
            now = self.life.now
            if isinstance(effect, Start):
                for bind in effect.binds:
                    started = TaskEvent(
                        kind=TaskEventKind.STARTED,
                        time=now,
                        job=bind.job,
                        task=bind.task,
                        node=bind.node,
                    )
                    pending.extend(self.life.on_event(started, now=now))
            elif isinstance(effect, Stop):
                for evict in effect.evictions:
                    stopped = TaskEvent(
                        kind=TaskEventKind.EXITED,
                        time=now,
                        job=evict.job,
                        task=evict.task,
                        node=evict.node,
                        exit_code=143,
                        stopped=True,
                    )
                    pending.extend(self.life.on_event(stopped, now=now))
