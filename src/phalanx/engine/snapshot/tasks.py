"""Tasks, roles and jobs as a snapshot holds them: the statuses, and the holders whose
counters ``Snapshot.move`` keeps.

A holder lives as long as its snapshot tracks the job: from ``Snapshot.build`` or
``add_job`` until ``remove_job`` (a driver's ``ClusterState`` keeps them across cycles).
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

from phalanx.domain.job import Job, JobPhase, Role, TaskPhase
from phalanx.engine.cards import CardDemand
from phalanx.engine.snapshot.units import Vector

if TYPE_CHECKING:
    from phalanx.engine.snapshot.queues import QueueInfo


class TaskStatus(IntEnum):
    """A task's status inside a session; ALLOCATED and PIPELINED exist only in sessions."""

    PENDING = 0
    PIPELINED = 1  # promised resources that are still being released
    ALLOCATED = 2  # placed in this session
    BOUND = 3
    RUNNING = 4
    RELEASING = 5
    SUCCEEDED = 6
    FAILED = 7


#: Statuses whose request is held on a node.
ON_NODE = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING}
)
#: Statuses charged to the job and its queue (a releasing task is already given back).
CHARGED = frozenset(
    {TaskStatus.PIPELINED, TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING}
)
#: Statuses that count towards a gang's minAvailable.
READY = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED}
)
#: Tasks that may be evicted.
EVICTABLE = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
PLACING = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})  # placed in this session

#: The engine status of a task in each lifecycle phase.
STATUS_OF_PHASE = {
    TaskPhase.PENDING: TaskStatus.PENDING,
    TaskPhase.BOUND: TaskStatus.BOUND,
    TaskPhase.RUNNING: TaskStatus.RUNNING,
    TaskPhase.RELEASING: TaskStatus.RELEASING,
    TaskPhase.SUCCEEDED: TaskStatus.SUCCEEDED,
    TaskPhase.FAILED: TaskStatus.FAILED,
}


#: phase -> (status, holds its node, charged to job and queue), one lookup per task.
PHASE_FACTS = {
    phase: (status, status in ON_NODE, status in CHARGED)
    for phase, status in STATUS_OF_PHASE.items()
}


class RoleInfo:
    """One role of a job: an equivalence class of identical tasks."""

    __slots__ = ("cards", "index", "key", "name", "request", "resources", "row", "spec")

    def __init__(
        self,
        spec: Role,
        index: int,
        request: Vector,
        job_name: str,
        cards: CardDemand | None,
        row: int,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.index = index
        self.request = request
        self.row = row  # the index of ``request`` in the snapshot's ``requests``
        self.resources = spec.resources
        self.key = (job_name, spec.name)
        self.cards = cards  # what each task needs from a node's cards; None: no GPU


class TaskInfo:
    """One task's mutable state in a snapshot (its status, node and cards)."""

    __slots__ = ("gpus", "index", "job", "node", "role", "start_time", "status")

    def __init__(
        self,
        job: JobInfo,
        role: RoleInfo,
        index: int,
        status: TaskStatus,
        node: int,
        start_time: float | None,
        gpus: tuple[int, ...],
    ) -> None:
        self.job = job
        self.role = role
        self.index = index
        self.status = status
        self.node = node
        self.start_time = start_time
        self.gpus = gpus

    @property
    def name(self) -> str:
        """``<job>-<role>-<index>``."""
        return f"{self.job.name}-{self.role.name}-{self.index}"

    @property
    def request(self) -> Vector:
        """The task's resource request as a row over the snapshot's dims."""
        return self.role.request

    def __repr__(self) -> str:
        return f"TaskInfo({self.name}, {self.status.name}, node={self.node})"


class JobInfo:
    """One job's mutable state in a snapshot, with counters kept by ``Snapshot.move``."""

    __slots__ = (
        "_min_request",
        "allocated",
        "attained_service",
        "counts",
        "creation_time",
        "min_available",
        "name",
        "pending_since",
        "phase",
        "priority",
        "queue",
        "ready_count",
        "roles",
        "spec",
        "tasks",
        "user",
        "version",
    )

    def __init__(self, spec: Job, queue: QueueInfo, roles: list[RoleInfo]) -> None:
        self.spec = spec
        self.name = spec.name
        self.queue = queue
        self.user = spec.user
        self.priority = spec.priority
        self.phase = spec.phase
        self.creation_time = spec.creation_time
        self.pending_since = (
            spec.creation_time if spec.pending_since is None else spec.pending_since
        )
        self.min_available = spec.gang_size
        self.attained_service = spec.attained_service
        self.roles = roles
        self.tasks: list[TaskInfo] = []
        self.counts = [0] * len(TaskStatus)
        #: tasks counting towards the gang (allocated, bound, running, succeeded), kept by ``Snapshot.move``
        self.ready_count = 0
        #: bumped by ``Snapshot.move`` whenever one of the job's tasks moves
        self.version = 0
        self._min_request: Vector | None = None
        self.allocated: Vector = np.zeros(len(roles[0].request) if roles else 0)

    def count(self, *statuses: TaskStatus) -> int:
        """How many tasks are in any of ``statuses``."""
        return sum(self.counts[s] for s in statuses)

    @property
    def pending_count(self) -> int:
        """Tasks still waiting for a node."""
        return self.counts[TaskStatus.PENDING]

    def pending_tasks(self) -> list[TaskInfo]:
        """Pending tasks in role, then index order."""
        return [t for t in self.tasks if t.status is TaskStatus.PENDING]

    def min_request(self) -> Vector:
        """Resources of the first ``min_available`` tasks in role order (the gang's minimum).

        Computed once: roles and minAvailable never change. Callers must not modify it.
        """
        if self._min_request is None:
            total = np.zeros_like(self.allocated)
            remaining = self.min_available
            for role in self.roles:
                take = min(remaining, role.spec.gang_replicas)
                total += role.request * take
                remaining -= take
            self._min_request = total
        return self._min_request

    def service(self, now: float) -> float:
        """GPU-seconds attained by ``now``: ``attained_service`` (runs that ended) plus every
        task on a node since its start time."""
        running = sum(
            task.role.spec.resources.get("gpu") * (now - task.start_time)
            for task in self.tasks
            if task.start_time is not None and task.status in ON_NODE
        )
        return self.attained_service + running

    @property
    def running(self) -> bool:
        """True once the job has been started (some task is on a node or done)."""
        return self.ready_count > 0 or self.phase is JobPhase.RUNNING

    def __repr__(self) -> str:
        return f"JobInfo({self.name})"
