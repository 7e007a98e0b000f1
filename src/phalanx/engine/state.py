"""A snapshot kept up to date between sessions, for drivers that run many cycles.

Rebuilding a snapshot from every job each cycle costs time proportional to every task
in the cluster. ``ClusterState`` instead applies each change as it happens (a job
arrives, a task starts, stops or finishes) and runs each session in a fork of the
snapshot that is reverted afterwards, so a cycle costs what the session does. Same
inputs give the same Decisions as ``Snapshot.build`` over the same jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, JobPhase, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.progress import Progress
from phalanx.domain.queue import Queue
from phalanx.engine.cycle import run_cycle
from phalanx.engine.decisions import Decisions
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.kept import KeptState
from phalanx.engine.framework.registry import Registry
from phalanx.engine.snapshot import (
    ON_NODE,
    STATUS_OF_PHASE,
    JobInfo,
    Snapshot,
    TaskInfo,
    Vector,
    dimensions,
)
from phalanx.engine.snapshot.usage import DEFAULT_HALF_LIFE, UsageBook, hold_task, release_task


class ClusterState:
    """Nodes, queues and live jobs, changed one event at a time; sessions leave it as it
    was (each runs in a fork of the snapshot). The state is changed only between cycles.

    Resource dimensions are fixed at construction (those of the nodes and queues, plus
    ``extra_dims``); a job asking for a resource outside them is reported as invalid.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        queues: Sequence[Queue],
        *,
        extra_dims: Iterable[str] = (),
        half_life: float = DEFAULT_HALF_LIFE,
    ) -> None:
        self.snapshot = Snapshot(
            nodes, queues, dimensions(nodes, queues, (), extra=tuple(extra_dims))
        )
        #: users' past usage, decaying at ``half_life`` (``Lifecycle.rebuild`` carries it
        #: over to the state that replaces this one)
        self.snapshot.usage = UsageBook(self.snapshot.dims, half_life=half_life)
        self.snapshot.epoch = 0  # every change below that can make room counts
        #: what one cycle keeps for the next (see ``framework.kept``)
        self.kept = KeptState(self.snapshot)
        #: each queue's deserved share as the last session computed it, by name (empty
        #: until a session ran on this state: the fork reverts the snapshot's own copy)
        self.shares: dict[str, Vector] = {}

    def add_job(self, job: Job) -> JobInfo | None:
        """Track a new job (its tasks may already hold nodes). None when it cannot be tracked."""
        if job.name in self.snapshot.jobs:
            raise InvalidInput(
                f"job {job.name!r} is already tracked", field="jobs", fix="use a unique job name"
            )
        return self.snapshot.add_job(job)

    def remove_job(self, name: str) -> None:
        """Stop tracking a job; whatever its tasks held is given back."""
        self.snapshot.epoch = (self.snapshot.epoch or 0) + 1
        self.snapshot.remove_job(name)

    def job(self, name: str) -> JobInfo:
        """The tracked job ``name``."""
        return self.snapshot.jobs[name]

    def set_task(
        self,
        task: TaskInfo,
        phase: TaskPhase,
        node: str | None = None,
        start_time: float | None = None,
        *,
        now: float | None = None,
        gpus: tuple[int, ...] = (),
    ) -> None:
        """Move one task to ``phase`` (on ``node`` for Bound/Running), keeping every aggregate right.

        A task arriving on a node holds ``gpus`` (the cards its bind named). A task leaving
        its node at ``now`` adds its GPU-seconds since its start time to the job's
        attained service, and its run to its user's usage (``Snapshot.usage``).
        """
        self.snapshot.epoch = (self.snapshot.epoch or 0) + 1
        index = None if node is None else self.snapshot.node_index[node]
        status = STATUS_OF_PHASE[phase]
        usage = self.snapshot.usage
        release_task(usage, task)
        if (
            now is not None
            and task.start_time is not None
            and task.status in ON_NODE
            and status not in ON_NODE
        ):
            gpu_count = task.role.spec.resources.get("gpu")
            task.job.attained_service += gpu_count * max(now - task.start_time, 0.0)
            job = task.job
            usage.bank((job.queue.name, job.user), task.request, task.start_time, now)
        self.snapshot.move(task, status, index, gpus)
        if start_time is not None or phase is TaskPhase.PENDING:
            task.start_time = start_time
        hold_task(usage, task)

    def report(self, name: str, progress: Progress) -> None:
        """Record job ``name``'s latest progress report (what goodput-aware policies read
        as ``JobInfo.spec.progress``). A report changes no room: the epoch stays."""
        info = self.snapshot.jobs[name]
        info.spec = replace(info.spec, progress=progress)

    def set_phase(self, name: str, phase: JobPhase, *, pending_since: float | None = None) -> None:
        """Record a job's new phase (and, when it waits again, since when)."""
        self.snapshot.epoch = (self.snapshot.epoch or 0) + 1
        info = self.snapshot.jobs[name]
        info.phase = phase
        if pending_since is not None:
            info.pending_since = pending_since

    def cycle(
        self, config: SchedulerConfig, *, now: float, registry: Registry | None = None
    ) -> Decisions:
        """One session on the current state, run in a fork of the snapshot: the state is
        unchanged afterwards (the driver applies the Decisions as events), but for
        ``shares``, which holds the queues' deserved shares the session computed."""
        with self.snapshot.forked():
            decisions = run_cycle(self.snapshot, config, now=now, registry=registry, kept=self.kept)
            self.shares = {name: q.deserved.copy() for name, q in self.snapshot.queues.items()}
        return decisions
