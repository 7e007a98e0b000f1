"""The cluster as one session sees it: node state in numpy arrays, jobs and queues as holders.

A Snapshot is built from domain values, mutated only through a Statement during a
session, and thrown away afterwards. Resource vectors are float64 rows over
``dims`` in canonical units (cpu millicores, memory bytes, gpu devices ...).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import IntEnum
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, JobPhase, Role, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.domain.resources import CORE_DIMENSIONS, GPU, GPU_MEMORY, Resources
from phalanx.engine.cards import CardDemand, Cards, card_demand

Vector = NDArray[np.float64]
T = TypeVar("T")
EPSILON = 1e-9
#: Engine units per canonical unit, for resources whose canonical amounts may be fractional.
ENGINE_UNITS = {GPU: 1000.0}


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
_PLACING = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})  # placed in this session

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
_PHASE_FACTS = {
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
        self.row = row  # the index of ``request`` in the snapshot's ``request_rows``
        self.resources = spec.resources
        self.key = (job_name, spec.name)
        self.cards = cards  # what each task needs from a node's cards; None: no GPU


class TaskInfo:
    """One task's mutable state in a session."""

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


class QueueInfo:
    """One queue of the tree with its aggregate state; ``ancestors`` runs self -> root."""

    __slots__ = (
        "allocated",
        "ancestors",
        "capability",
        "children",
        "deserved",
        "evictable",
        "guarantee",
        "inqueue",
        "jobs",
        "name",
        "parent",
        "spec",
        "uncapped",
    )

    def __init__(self, spec: Queue, ndims: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.parent: QueueInfo | None = None
        self.children: list[QueueInfo] = []
        self.ancestors: tuple[QueueInfo, ...] = ()
        self.jobs: dict[JobInfo, None] = {}  # an ordered set: arrival order, O(1) removal
        #: the bound and running tasks of its preemptible jobs (a leaf's), kept by ``move``:
        #: what eviction considers, without listing every task of the queue
        self.evictable: dict[TaskInfo, None] = {}
        self.allocated: Vector = np.zeros(ndims)
        self.inqueue: Vector = np.zeros(ndims)
        self.guarantee: Vector = np.zeros(ndims)
        self.deserved: Vector = np.zeros(ndims)  # set by a quota plugin
        self.capability: Vector = np.full(ndims, np.inf)
        self.uncapped = spec.capability is None  # no finite capability of its own

    @property
    def is_leaf(self) -> bool:
        """True when no queue names this one as its parent."""
        return not self.children

    def __repr__(self) -> str:
        return f"QueueInfo({self.name})"


class JobInfo:
    """One job's mutable state in a session, with counters kept by the Statement."""

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


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (if it runs) for a burst of long-lived objects."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Placements:
    """Rows to add to the node arrays, collected while jobs are read, applied at once."""

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.requests: list[int] = []  # index into the snapshot's distinct request rows
        self.releasing: list[int] = []

    def add_releasing(self, node: int, request: int) -> None:
        self.releasing.append(len(self.nodes))
        self.nodes.append(node)
        self.requests.append(request)

    def apply(self, snapshot: Snapshot) -> None:
        if not self.nodes:
            return
        nodes = np.array(self.nodes, dtype=np.intp)
        rows = snapshot.request_table()[np.array(self.requests, dtype=np.intp)]
        np.add.at(snapshot.used, nodes, rows)
        np.add.at(snapshot.task_count, nodes, 1)
        snapshot.changes += 1
        snapshot.node_changes[nodes] = snapshot.changes
        if self.releasing:
            picked = np.array(self.releasing, dtype=np.intp)
            np.add.at(snapshot.releasing, nodes[picked], rows[picked])
            np.add.at(snapshot.releasing_tasks, nodes[picked], 1)


class JobWatcher(Protocol):
    """Told of the jobs a snapshot starts or stops tracking (``Snapshot.watch_jobs``)."""

    def joined(self, snapshot: Snapshot, job: JobInfo) -> None: ...

    def left(self, job: JobInfo) -> None: ...


def dimensions(
    nodes: Sequence[Node],
    queues: Sequence[Queue],
    jobs: Sequence[Job],
    *,
    extra: Sequence[str] = (),
) -> tuple[str, ...]:
    """Resource names of a snapshot: cpu, memory, gpu, then every other name seen, sorted."""
    names: set[str] = set(extra)
    for node in nodes:
        names.update(node.capacity)
    for job in jobs:
        for role in job.roles:
            names.update(role.resources)
    for queue in queues:
        for vector in (queue.guarantee, queue.deserved, queue.capability):
            if vector is not None:
                names.update(vector)
    return CORE_DIMENSIONS + tuple(sorted(names - set(CORE_DIMENSIONS)))


class Snapshot:
    """Cluster state for one session. Mutate it only through a Statement.

    Arrays (N nodes x R dims): ``capacity``; ``used`` (held by tasks on the node,
    releasing ones included); ``releasing`` (held by tasks being stopped);
    ``pipelined`` (promised to pipelined tasks). ``idle = capacity - used``;
    ``future_idle = idle + releasing - pipelined``. ``cards`` holds each GPU card's free
    share; a task on a node holds the cards named in its ``gpus`` (a pipelined task holds
    none until it is allocated).
    """

    def __init__(
        self, nodes: Sequence[Node], queues: Sequence[Queue], dims: tuple[str, ...]
    ) -> None:
        self.dims = dims
        self.dim = {name: i for i, name in enumerate(dims)}
        #: engine units per canonical unit: GPUs are counted in thousandths (fractional sharing)
        self.unit: Vector = np.array([ENGINE_UNITS.get(name, 1.0) for name in dims])
        self.nodes = tuple(nodes)
        self.node_index = {node.name: i for i, node in enumerate(self.nodes)}
        if len(self.node_index) != len(self.nodes):
            raise InvalidInput(
                "two nodes share a name", field="nodes", fix="give every node a unique name"
            )
        n, r = len(self.nodes), len(dims)
        self.capacity: NDArray[np.float64] = np.zeros((n, r))
        for i, node in enumerate(self.nodes):
            self.capacity[i] = self.vector(node.capacity)
        self.used: NDArray[np.float64] = np.zeros((n, r))
        self.releasing: NDArray[np.float64] = np.zeros((n, r))
        self.pipelined: NDArray[np.float64] = np.zeros((n, r))
        self.task_count: NDArray[np.int64] = np.zeros(n, dtype=np.int64)
        self.releasing_tasks: NDArray[np.int64] = np.zeros(n, dtype=np.int64)
        self.max_tasks: NDArray[np.float64] = np.array(
            [np.inf if node.max_tasks is None else node.max_tasks for node in self.nodes],
            dtype=np.float64,
        )
        self.schedulable: NDArray[np.bool_] = np.array(
            [node.schedulable for node in self.nodes], dtype=np.bool_
        )
        self.schedulable.flags.writeable = False  # changed only by ``set_schedulable``
        self._total: Vector | None = None
        #: counts the changes to node usage (``move``, tasks read in); ``node_changes``
        #: holds, per node, the count at its last one: caches of per-node usage refresh
        #: only ``changed_nodes(since)`` instead of comparing every node
        self.changes = 0
        self.node_changes: NDArray[np.int64] = np.zeros(n, dtype=np.int64)
        self._job_watchers: list[JobWatcher] = []
        #: the jobs with a task allocated or pipelined in the session under way, kept by ``move``
        self.growing: set[JobInfo] = set()
        #: per-GPU state: which cards are free, and how much of each shared card
        self.cards = Cards(self.nodes)
        self._demands: dict[tuple[int, bool], CardDemand | None] = {}  # card shapes of requests
        self.queues: dict[str, QueueInfo] = {}
        self.jobs: dict[str, JobInfo] = {}
        self.orphans: list[tuple[Job, str]] = []  # jobs that cannot be tracked, and why
        #: jobs with a pending task, kept by ``move``: what a session has to look at
        self.waiting: dict[str, JobInfo] = {}
        #: jobs with an elastic role, by name (what the elastic action looks at)
        self.elastic: dict[str, JobInfo] = {}
        #: resources charged per (queue, user), kept by ``move``
        self.user_allocated: dict[tuple[str, str], Vector] = {}
        #: Counts the changes from outside a session that can make room for a job or let
        #: it preempt: a task moving, a job leaving or changing phase, a node opening or
        #: closing. None while nobody keeps count (a snapshot built for one session); a
        #: driver keeping the snapshot across sessions (``ClusterState``) keeps it, and
        #: refusals stand while it is unchanged (see the ``enqueue`` action).
        self.epoch: int | None = None
        self._label_columns: dict[str, NDArray[np.object_]] = {}
        self._node_derived: dict[str, object] = {}
        self._requests: dict[Resources, Vector] = {}
        self.request_rows: list[Vector] = []  # every distinct request row, in first-seen order
        self.request_ids: dict[int, int] = {}  # id(row) -> index in request_rows
        self._request_table: NDArray[np.float64] | None = None
        self._build_queue_tree(queues)

    # -- construction -----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        nodes: Sequence[Node],
        queues: Sequence[Queue] = (),
        jobs: Iterable[Job] = (),
    ) -> Snapshot:
        """Build a snapshot; jobs in a terminal phase are left out."""
        live = [
            j
            for j in jobs
            if j.phase not in (JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED)
        ]
        snapshot = cls(nodes, queues, dimensions(nodes, queues, live))
        placements = _Placements()
        with _collector_paused():  # every object made here stays alive: scanning them is waste
            for job in sorted(live, key=lambda j: (j.creation_time, j.name)):
                snapshot._add_job(job, placements)
        placements.apply(snapshot)
        return snapshot

    def _build_queue_tree(self, queues: Sequence[Queue]) -> None:
        ndims = len(self.dims)
        root = QueueInfo(Queue(name=ROOT_QUEUE, parent=""), ndims)
        self.root = root
        self.queues[ROOT_QUEUE] = root
        for spec in sorted(queues, key=lambda q: q.name):
            if spec.name in self.queues:
                raise InvalidInput(
                    f"queue {spec.name!r} is defined twice",
                    field="queues",
                    fix="give every queue a unique name",
                )
            info = QueueInfo(spec, ndims)
            info.guarantee = self.vector(spec.guarantee)
            if spec.capability is not None:
                info.capability = self.vector(spec.capability, missing=np.inf)
            self.queues[spec.name] = info
        for info in self.queues.values():
            if info is root:
                continue
            parent = self.queues.get(info.spec.parent)
            if parent is None:
                raise InvalidInput(
                    f"queue {info.name!r} names parent {info.spec.parent!r}, which does not exist",
                    field=f"queues.{info.name}.parent",
                    fix="create the parent queue or leave parent empty for the root",
                )
            info.parent = parent
            parent.children.append(info)
        for info in self.queues.values():
            chain: list[QueueInfo] = []
            cursor: QueueInfo | None = info
            while cursor is not None:
                if cursor in chain:
                    raise InvalidInput(
                        f"queue {info.name!r} is its own ancestor",
                        field=f"queues.{info.name}.parent",
                        fix="make the queue tree acyclic",
                    )
                chain.append(cursor)
                cursor = cursor.parent
            info.ancestors = tuple(chain)

    def add_job(self, job: Job) -> JobInfo | None:
        """Track one more job, charging what its tasks hold; None (an orphan) if it cannot be."""
        placements = _Placements()
        info = self._add_job(job, placements)
        placements.apply(self)
        if info is not None:
            for watcher in self._job_watchers:
                watcher.joined(self, info)
        return info

    def remove_job(self, name: str) -> None:
        """Stop tracking job ``name`` (an orphan is forgotten); its tasks give back what
        they held."""
        info = self.jobs.pop(name, None)
        if info is None:
            self.orphans = [(job, why) for job, why in self.orphans if job.name != name]
            return
        for task in info.tasks:
            if task.status is not TaskStatus.PENDING:
                self.move(task, TaskStatus.PENDING)
        self.waiting.pop(name, None)
        self.elastic.pop(name, None)
        del info.queue.jobs[info]
        for watcher in self._job_watchers:
            watcher.left(info)

    def watch_jobs(self, watcher: JobWatcher) -> None:
        """Tell ``watcher`` of every job tracked (``add_job``) or dropped (``remove_job``)
        from now on, for a cache of what the jobs are that lives as long as the snapshot."""
        self._job_watchers.append(watcher)

    def _roles(self, job: Job) -> list[RoleInfo] | None:
        """The job's roles with their request rows and card shapes; None (an orphan) when a
        role's GPU request cannot be served by cards."""
        roles = []
        multi_node = sum(r.replicas for r in job.roles if r.resources.get(GPU) >= 1) > 1
        for i, role in enumerate(job.roles):
            request = self.request_vector(role.resources)
            try:
                cards = self.card_demand(request, multi_node=multi_node)
            except ValueError as error:
                self.orphans.append(
                    (
                        job,
                        f"role {role.name} asks for {error}; fix: ask for gpu below 1 "
                        "(a share) or a whole number of GPUs",
                    )
                )
                return None
            roles.append(RoleInfo(role, i, request, job.name, cards, self.request_ids[id(request)]))
        return roles

    def _add_job(self, job: Job, placements: _Placements) -> JobInfo | None:
        queue = self.queues.get(job.queue)
        if queue is None or not queue.is_leaf or queue is self.root:
            self.orphans.append(
                (
                    job,
                    f"queue {job.queue!r} does not exist or is not a leaf queue; "
                    "fix: create it, or submit to an existing leaf queue",
                )
            )
            return None
        unknown = sorted(
            {n for r in job.roles for n, v in r.resources.items() if v and n not in self.dim}
        )
        if unknown:
            self.orphans.append(
                (
                    job,
                    f"it asks for {', '.join(unknown)}, which no node offers; "
                    "fix: remove that request or add nodes that have it",
                )
            )
            return None
        roles = self._roles(job)
        if roles is None:
            return None
        info = JobInfo(job, queue, roles)
        by_name = {role.name: role for role in roles}
        charged = [0] * len(roles)
        node_index, counts, tasks = self.node_index, info.counts, info.tasks
        placed_nodes, placed_requests = placements.nodes, placements.requests
        request_ids = [self.request_ids[id(role.request)] for role in roles]
        for task in job.all_tasks():
            role = by_name.get(task.role)
            if role is None:
                raise InvalidInput(
                    f"task {task.role}-{task.index} names a role the job does not have",
                    field=f"jobs.{job.name}.tasks",
                    fix=f"use one of: {', '.join(by_name)}",
                )
            status, on_node, is_charged = _PHASE_FACTS[task.phase]
            node = -1 if task.node is None else node_index.get(task.node, -1)
            if on_node:
                if node < 0:
                    status, is_charged = TaskStatus.PENDING, False  # node gone: reported lost
                elif status is TaskStatus.RELEASING:
                    placements.add_releasing(node, request_ids[role.index])
                else:
                    placed_nodes.append(node)
                    placed_requests.append(request_ids[role.index])
            held = TaskInfo(info, role, task.index, status, node, task.start_time, ())
            if on_node and node >= 0 and role.cards is not None:
                self._hold_cards(held, node, task.gpus)
                if status is TaskStatus.RELEASING and held.gpus:
                    self.cards.releasing(role.cards, node, held.gpus, 1)
            tasks.append(held)
            counts[status] += 1
            if status in READY:
                info.ready_count += 1
            if is_charged:
                charged[role.index] += 1
        for role, count in zip(roles, charged, strict=True):
            if count:
                info.allocated += role.request * count
        self._track(info)
        return info

    def _track(self, info: JobInfo) -> None:
        """List a job read in (its tasks' counts and ``allocated`` set) with its queue,
        charging the queue, its ancestors and its user."""
        queue = info.queue
        queue.jobs[info] = None
        if info.spec.preemptible:
            queue.evictable.update((t, None) for t in info.tasks if t.status in EVICTABLE)
        for ancestor in queue.ancestors:
            ancestor.allocated += info.allocated
        user = (queue.name, info.user)
        if user not in self.user_allocated:
            self.user_allocated[user] = np.zeros(len(self.dims))
        self.user_allocated[user] += info.allocated
        self.jobs[info.name] = info
        if info.counts[TaskStatus.PENDING]:
            self.waiting[info.name] = info
        if info.spec.elastic_role() is not None:
            self.elastic[info.name] = info

    # -- the one way task state changes ----------------------------------------------------

    def move(
        self,
        task: TaskInfo,
        status: TaskStatus,
        node: int | None = None,
        gpus: Sequence[int] = (),
    ) -> None:
        """Put ``task`` in ``status`` (on ``node``, where the status has one), keeping every
        aggregate consistent: node ``used``/``releasing``/``pipelined``/``task_count``, the
        cards it holds, the job's counters and ``allocated``, and ``allocated`` of its
        queue and ancestors.

        ``node`` defaults to the task's current node; statuses without a node clear it.
        A task arriving on a node holds ``gpus`` when they can serve it there, else the
        lowest-index cards that can; it keeps them until it leaves the node.
        Any status may follow any other: the lifecycle rules live with the callers.
        """
        old, request, left = task.status, task.request, task.node
        where = left if node is None else node
        if task.role.cards is not None:
            self._move_cards(task, status, where, gpus)
        if old in ON_NODE:
            self.used[task.node] -= request
            self.task_count[task.node] -= 1
            if old is TaskStatus.RELEASING:
                self.releasing[task.node] -= request
                self.releasing_tasks[task.node] -= 1
        elif old is TaskStatus.PIPELINED:
            self.pipelined[task.node] -= request
            self.task_count[task.node] -= 1
        job = task.job
        job.version += 1
        charge = (status in CHARGED) - (old in CHARGED)
        if charge:
            delta = request if charge > 0 else -request
            job.allocated += delta
            self.user_allocated[(job.queue.name, job.user)] += delta
            for queue in job.queue.ancestors:
                queue.allocated += delta
        counts = job.counts
        counts[old] -= 1
        counts[status] += 1
        job.ready_count += (status in READY) - (old in READY)
        if old is TaskStatus.PENDING and not counts[TaskStatus.PENDING]:
            self.waiting.pop(job.name, None)
        elif (
            status is TaskStatus.PENDING
            and counts[TaskStatus.PENDING] == 1
            and job.name in self.jobs
        ):
            self.waiting[job.name] = job
        task.status = status
        if status in ON_NODE:
            task.node = where
            self.used[where] += request
            self.task_count[where] += 1
            if status is TaskStatus.RELEASING:
                self.releasing[where] += request
                self.releasing_tasks[where] += 1
        elif status is TaskStatus.PIPELINED:
            task.node = where
            self.pipelined[where] += request
            self.task_count[where] += 1  # it will run there: it takes one of the node's slots
        else:
            task.node = -1
        self._moved(task, old, left)

    def _moved(self, task: TaskInfo, old: TaskStatus, left: int) -> None:
        """The rest of ``move`` once ``task`` moved from status ``old`` on node ``left``:
        its queue's evictable tasks, the growing jobs and the nodes' change counts."""
        job, status = task.job, task.status
        evictable = status in EVICTABLE
        if (old in EVICTABLE) != evictable and job.spec.preemptible:
            if evictable:
                job.queue.evictable[task] = None
            else:
                del job.queue.evictable[task]
        if old in _PLACING or status in _PLACING:
            if job.counts[TaskStatus.ALLOCATED] or job.counts[TaskStatus.PIPELINED]:
                self.growing.add(job)
            else:
                self.growing.discard(job)
        self.changes += 1
        if left >= 0:
            self.node_changes[left] = self.changes
        if task.node >= 0:
            self.node_changes[task.node] = self.changes

    def _move_cards(
        self, task: TaskInfo, status: TaskStatus, where: int, gpus: Sequence[int]
    ) -> None:
        """The card side of ``move`` (called before the task's status changes)."""
        demand = task.role.cards
        assert demand is not None
        old = task.status
        if task.gpus:
            if old is TaskStatus.RELEASING and status is not TaskStatus.RELEASING:
                self.cards.releasing(demand, task.node, task.gpus, -1)
            if status not in ON_NODE or where != task.node:
                self.cards.give(demand, task.node, task.gpus)
                task.gpus = ()
        if status in ON_NODE:
            if not task.gpus:
                self._hold_cards(task, where, gpus)
            if status is TaskStatus.RELEASING and old is not TaskStatus.RELEASING and task.gpus:
                self.cards.releasing(demand, where, task.gpus, 1)

    def _hold_cards(self, task: TaskInfo, node: int, gpus: Sequence[int]) -> None:
        """Give ``task`` (arriving on ``node``) the cards it needs, ``gpus`` where they serve."""
        demand = task.role.cards
        assert demand is not None
        chosen: Sequence[int] | None = gpus
        if not (gpus and self.cards.serves(demand, node, gpus)):
            chosen = self.cards.first_fit(demand, node)
        if chosen:  # none fit: the node is over-committed (a driver's report); hold nothing
            self.cards.take(demand, node, chosen)
            task.gpus = tuple(chosen)

    # -- helpers ----------------------------------------------------------------------

    def card_demand(self, request: Vector, *, multi_node: bool = False) -> CardDemand | None:
        """The card shape of a request row (from ``request_vector``) for a task of a
        ``multi_node`` job or not; ``ValueError`` for a GPU count above one that is not whole."""
        key = (self.request_ids[id(request)], multi_node)
        if key not in self._demands:
            gpu, memory = self.dim.get(GPU), self.dim.get(GPU_MEMORY)
            self._demands[key] = card_demand(
                0.0 if gpu is None else float(request[gpu]),
                0.0 if memory is None else float(request[memory]),
                multi_node=multi_node,
            )
        return self._demands[key]

    def request_vector(self, resources: Resources) -> Vector:
        """A read-only row for a task request, shared by every role asking the same."""
        row = self._requests.get(resources)
        if row is None:
            row = self.vector(resources)
            row.flags.writeable = False
            self._requests[resources] = row
            self.request_ids[id(row)] = len(self.request_rows)
            self.request_rows.append(row)
        return row

    def request_table(self) -> NDArray[np.float64]:
        """Every distinct request row, stacked in ``request_rows`` order (read-only)."""
        if self._request_table is None or len(self._request_table) != len(self.request_rows):
            table = np.array(self.request_rows).reshape(len(self.request_rows), len(self.dims))
            table.flags.writeable = False
            self._request_table = table
        return self._request_table

    def vector(self, resources: Mapping[str, float] | None, *, missing: float = 0.0) -> Vector:
        """``resources`` as a row over ``dims`` in engine units; names not given get ``missing``.

        Engine units are whole numbers (millicores, bytes, milli-GPUs, ...), so sums and
        differences of rows are exact and a discarded statement restores the snapshot
        bit for bit. Amounts finer than a unit are rounded to the nearest unit.
        """
        row = np.full(len(self.dims), missing)
        if resources:
            for name, value in resources.items():
                index = self.dim.get(name)
                if index is not None:
                    row[index] = np.rint(value * self.unit[index]) if np.isfinite(value) else value
        return row

    def resources(self, row: Vector) -> Resources:
        """A row in engine units back to a Resources value (infinite entries dropped)."""
        return Resources.of(
            (name, float(v) / unit)
            for name, v, unit in zip(self.dims, row, self.unit, strict=True)
            if np.isfinite(v)
        )

    def changed_nodes(self, since: int) -> NDArray[np.intp]:
        """The nodes whose usage changed after ``changes`` was ``since``, in index order."""
        if since >= self.changes:
            return np.empty(0, dtype=np.intp)
        return np.flatnonzero(self.node_changes > since)

    def cached(self, key: str, build: Callable[[Snapshot], T]) -> T:
        """A value derived from what never changes in a snapshot's life (nodes' labels and
        taints, queue specs), built once per snapshot; ``key`` names it (prefix it with the
        plugin's name). Schedulability, usage and jobs do change: a value that depends on
        them must be keyed by them (``capacity`` keeps a memo keyed by the root's
        capability) or follow them (``changed_nodes``, ``watch_jobs``).
        """
        if key not in self._node_derived:
            self._node_derived[key] = build(self)
        return self._node_derived[key]  # type: ignore[return-value]

    def label_column(self, key: str) -> NDArray[np.object_]:
        """Every node's value of label ``key`` (None where absent), cached."""
        column = self._label_columns.get(key)
        if column is None:
            column = np.array([node.labels.get(key) for node in self.nodes], dtype=object)
            self._label_columns[key] = column
        return column

    @property
    def idle(self) -> NDArray[np.float64]:
        """Resources free right now, per node."""
        return self.capacity - self.used

    @property
    def future_idle(self) -> NDArray[np.float64]:
        """Resources free once releasing tasks are gone, less what is promised to pipelined tasks."""
        return self.capacity - self.used + self.releasing - self.pipelined

    @property
    def total(self) -> Vector:
        """Total capacity of schedulable nodes (read-only; kept until schedulability changes)."""
        if self._total is None:
            total = (
                self.capacity[self.schedulable].sum(axis=0)
                if len(self.nodes)
                else np.zeros(len(self.dims))
            )
            total.flags.writeable = False
            self._total = total
        return self._total

    def set_schedulable(self, node: int, schedulable: bool) -> None:
        """Open or close node ``node`` to new work (a cordon, a failure, a repair)."""
        if bool(self.schedulable[node]) != schedulable:
            if self.epoch is not None:
                self.epoch += 1
            self.schedulable.flags.writeable = True
            self.schedulable[node] = schedulable
            self.schedulable.flags.writeable = False
            self._total = None

    def leaf_queues(self) -> list[QueueInfo]:
        """Leaf queues, by name."""
        return [q for q in self.queues.values() if q.is_leaf and q is not self.root]
