"""A tiny deterministic driver for multi-cycle scenarios (a later simulator replaces it).

``World`` holds the domain jobs between cycles. ``step(now)`` first retires tasks
whose run ended by ``now``, then builds a fresh snapshot, runs one cycle and applies
its Decisions back to the jobs:

- admit: Pending -> Queued;
- bind: the task runs on that node from ``now``; the job is Running;
- evict: the task is gone from its node at once (it is Pending again, or removed with
  its job when ``requeue_evicted`` is False); a job left with no task on a node is
  Queued again and pending since ``now``;
- pipeline: nothing; the task is simply placed by a later cycle once room is free.

A task ends at ``start_time + runtime``, where the runtime is ``runtimes[job]``, else the
job's walltime, else its runtime estimate, else never. A job whose every task ended
is removed. No clock is read: time is whatever the test passes in.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from phalanx.domain.job import Job, JobPhase, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine import Decisions, SchedulerConfig, Snapshot, run_cycle

ON_NODE = (TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.RELEASING)


@dataclass
class World:
    """Nodes, queues and jobs carried from one cycle to the next."""

    nodes: Sequence[Node]
    queues: Sequence[Queue]
    config: SchedulerConfig
    jobs: dict[str, Job] = field(default_factory=dict)
    runtimes: dict[str, float] = field(default_factory=dict)
    requeue_evicted: bool = True
    history: list[tuple[float, Decisions]] = field(default_factory=list)
    finished: dict[str, float] = field(default_factory=dict)  # job -> time it ended

    def submit(self, *jobs: Job, runtime: float | None = None) -> None:
        """Add jobs (names must be new); ``runtime`` overrides walltime as the true run time."""
        for job in jobs:
            assert job.name not in self.jobs, f"job {job.name} submitted twice"
            self.jobs[job.name] = job
            if runtime is not None:
                self.runtimes[job.name] = runtime

    def runtime(self, job: Job) -> float:
        """How long each of ``job``'s tasks really runs."""
        if job.name in self.runtimes:
            return self.runtimes[job.name]
        if job.walltime is not None:
            return job.walltime
        return job.runtime_estimate if job.runtime_estimate is not None else math.inf

    def step(self, now: float) -> Decisions:
        """Retire what ended by ``now``, run one cycle at ``now`` and apply its Decisions."""
        self._retire(now)
        snapshot = Snapshot.build(nodes=self.nodes, queues=self.queues, jobs=self.jobs.values())
        decisions = run_cycle(snapshot, self.config, now=now)
        self._apply(decisions, now)
        self.history.append((now, decisions))
        return decisions

    def run(self, times: Iterable[float]) -> list[Decisions]:
        """``step`` at each time, in order."""
        return [self.step(t) for t in times]

    # -- views --------------------------------------------------------------------------

    def placed(self, job: str) -> list[str]:
        """Nodes of ``job``'s tasks that hold a node, in task order."""
        found = self.jobs.get(job)
        if found is None:
            return []
        return [t.node for t in found.all_tasks() if t.phase in ON_NODE and t.node is not None]

    def used(self, queue: str, resource: str = "gpu") -> float:
        """How much of ``resource`` the running tasks of ``queue``'s jobs hold."""
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

    # -- applying -----------------------------------------------------------------------

    def _retire(self, now: float) -> None:
        for name in sorted(self.jobs):
            job = self.jobs[name]
            runtime = self.runtime(job)
            tasks = tuple(
                dataclasses.replace(t, phase=TaskPhase.SUCCEEDED, node=None)
                if t.phase in ON_NODE and (t.start_time or 0.0) + runtime <= now
                else t
                for t in job.all_tasks()
            )
            if tasks and all(t.phase is TaskPhase.SUCCEEDED for t in tasks):
                del self.jobs[name]
                self.finished[name] = max((t.start_time or 0.0) + runtime for t in job.all_tasks())
            else:
                self.jobs[name] = dataclasses.replace(job, tasks=tasks)

    def _apply(self, decisions: Decisions, now: float) -> None:
        for admit in decisions.admitted:
            self.jobs[admit.job] = dataclasses.replace(self.jobs[admit.job], phase=JobPhase.QUEUED)
        for bind in decisions.binds:
            self._set_task(
                bind.job,
                bind.task,
                phase=TaskPhase.RUNNING,
                node=bind.node,
                start_time=now,
                gpus=bind.gpus,
            )
        for evict in decisions.evictions:
            if not self.requeue_evicted:
                self.jobs.pop(evict.job, None)
                continue
            if evict.job in self.jobs:
                self._set_task(
                    evict.job,
                    evict.task,
                    phase=TaskPhase.PENDING,
                    node=None,
                    start_time=None,
                    gpus=(),
                )
        for name in sorted({b.job for b in decisions.binds} | {e.job for e in decisions.evictions}):
            job = self.jobs.get(name)
            if job is None:
                continue
            on_node = any(t.phase in ON_NODE for t in job.all_tasks())
            if on_node:
                self.jobs[name] = dataclasses.replace(job, phase=JobPhase.RUNNING)
            else:
                self.jobs[name] = dataclasses.replace(job, phase=JobPhase.QUEUED, pending_since=now)

    def _set_task(self, job_name: str, task_name: str, **changes: object) -> None:
        job = self.jobs[job_name]
        tasks = list(job.all_tasks())
        for i, task in enumerate(tasks):
            if task.name(job_name) == task_name:
                tasks[i] = dataclasses.replace(task, **changes)  # type: ignore[arg-type]
                break
        else:
            raise AssertionError(f"no task {task_name} in {job_name}")
        self.jobs[job_name] = dataclasses.replace(job, tasks=tuple(tasks))
