"""``Snapshot``: the cluster as the engine sees it, and the one way task state changes.

A snapshot is built from domain values (``Snapshot.build``) or kept up to date by a
driver (``engine.state.ClusterState`` adds and removes jobs and moves tasks as events
arrive, for as long as the driver runs). Sessions change it only through a Statement;
``fork`` records every change from then on so that ``revert`` can undo them exactly.
Its node arrays are rows over ``dims`` in engine units (see ``units``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import EngineInvariantError, InvalidInput
from phalanx.domain.job import Job, JobPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.domain.resources import GPU, GPU_MEMORY, Resources
from phalanx.engine.cards import Cards
from phalanx.engine.snapshot.cardbridge import move_cards
from phalanx.engine.snapshot.forks import Fork, Move
from phalanx.engine.snapshot.jobs import JobWatcher, Placements, collector_paused, read_job
from phalanx.engine.snapshot.labels import LabelColumns
from phalanx.engine.snapshot.queues import QueueInfo, queue_tree
from phalanx.engine.snapshot.requests import Requests
from phalanx.engine.snapshot.tasks import (
    CHARGED,
    EVICTABLE,
    ON_NODE,
    PLACING,
    READY,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from phalanx.engine.snapshot.units import ENGINE_UNITS, Vector, dimensions
from phalanx.engine.snapshot.usage import UsageBook, hold_task, release_task


class Snapshot:
    """The cluster: nodes, queues and tracked jobs. Sessions mutate it only through a
    Statement; drivers through ``add_job``, ``remove_job``, ``move`` and ``set_schedulable``.

    Arrays (N nodes x R dims): ``capacity`` (allocatable: a node's cordoned cards, in
    ``cordoned``, are out of it); ``used`` (held by tasks on the node, releasing ones
    included, and those on cordoned cards); ``releasing`` (held by tasks being stopped);
    ``pipelined`` (promised to pipelined tasks). ``idle = capacity - used``;
    ``future_idle = idle + releasing - pipelined``. ``cards`` holds each GPU card's free
    share; a task on a node holds the cards named in its ``gpus`` (a pipelined task holds
    none until it is allocated).

    ``fork`` / ``revert`` / ``commit`` (or ``with snapshot.forked():``) try changes out:
    after ``revert`` every task is back in its status, on its node, with its cards, and
    every aggregate (node arrays, cards, job, queue and user charges, the waiting and
    growing jobs) and each queue's session values (``inqueue``, ``deserved``,
    ``capability``) are as they were at ``fork``. Change counters (``changes``,
    ``node_changes``, ``JobInfo.version``) keep counting: caches that follow them see the
    undone moves as changes. Forks nest; while one is open, jobs cannot be added or
    removed and nodes cannot open or close (``EngineInvariantError``).
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
        #: per-GPU state: which cards are free, and how much of each shared card
        self.cards = Cards(self.nodes)
        self.capacity: NDArray[np.float64] = np.zeros((n, r))
        for i, node in enumerate(self.nodes):
            self.capacity[i] = self.vector(node.capacity)
        #: what each node's cordoned cards (``Node.cordoned_gpus``) take out of its
        #: capacity: zero but for those nodes (read-only)
        self.cordoned: NDArray[np.float64] = np.zeros((n, r))
        if self.cards.any_cordoned:
            self.cordoned = _cordoned(self.cards, self.capacity, self.dim, self.unit)
            self.capacity -= self.cordoned
        self.cordoned.flags.writeable = False
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
        self.jobs: dict[str, JobInfo] = {}
        self.orphans: list[tuple[Job, str]] = []  # jobs that cannot be tracked, and why
        #: jobs with a pending task, kept by ``move``: what a session has to look at
        self.waiting: dict[str, JobInfo] = {}
        #: jobs with an elastic role, by name (what the elastic action looks at)
        self.elastic: dict[str, JobInfo] = {}
        #: resources charged per (queue, user), kept by ``move``
        self.user_allocated: dict[tuple[str, str], Vector] = {}
        #: each (queue, user)'s closed runs and tasks on nodes, for fair-share and budgets:
        #: kept as jobs come and go and by the driver (``ClusterState.set_task``), never
        #: by a session, so forks leave it alone
        self.usage = UsageBook(dims)
        #: Counts the changes from outside a session that can make room for a job or let
        #: it preempt: a task moving, a job leaving or changing phase, a node opening or
        #: closing. None while nobody keeps count (a snapshot built for one session); a
        #: driver keeping the snapshot across sessions (``ClusterState``) keeps it, and
        #: refusals stand while it is unchanged (see the ``enqueue`` action).
        self.epoch: int | None = None
        self._labels = LabelColumns(self.nodes)
        #: every distinct task request, interned by value
        self.requests = Requests(self.vector, self.dim)
        self.queues: dict[str, QueueInfo] = queue_tree(queues, r, self.vector)
        self.root = self.queues[ROOT_QUEUE]
        self._forks: list[Fork] = []
        self._journal: list[Move] | None = None  # the moves since the oldest open fork

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
        placements = Placements()
        with collector_paused():  # every object made here stays alive: scanning them is waste
            for job in sorted(live, key=lambda j: (j.creation_time, j.name)):
                read_job(snapshot, job, placements)
        placements.apply(snapshot)
        for info in snapshot.jobs.values():
            for task in info.tasks:
                hold_task(snapshot.usage, task)
        return snapshot

    def add_job(self, job: Job) -> JobInfo | None:
        """Track one more job, charging what its tasks hold; None (an orphan) if it cannot be."""
        self._unforked("add a job")
        placements = Placements()
        info = read_job(self, job, placements)
        placements.apply(self)
        if info is not None:
            for task in info.tasks:
                hold_task(self.usage, task)
            for watcher in self._job_watchers:
                watcher.joined(self, info)
        return info

    def remove_job(self, name: str) -> None:
        """Stop tracking job ``name`` (an orphan is forgotten); its tasks give back what
        they held."""
        self._unforked("remove a job")
        info = self.jobs.pop(name, None)
        if info is None:
            self.orphans = [(job, why) for job, why in self.orphans if job.name != name]
            return
        for task in info.tasks:
            release_task(self.usage, task)
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
        if self._journal is not None:
            self._journal.append((task, old, left, task.gpus))
        where = left if node is None else node
        if task.role.cards is not None:
            move_cards(self.cards, task, status, where, gpus)
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
        if old in PLACING or status in PLACING:
            if job.counts[TaskStatus.ALLOCATED] or job.counts[TaskStatus.PIPELINED]:
                self.growing.add(job)
            else:
                self.growing.discard(job)
        self.changes += 1
        if left >= 0:
            self.node_changes[left] = self.changes
        if task.node >= 0:
            self.node_changes[task.node] = self.changes

    # -- fork and revert ------------------------------------------------------------------

    def fork(self) -> None:
        """Start recording changes, to be undone by ``revert`` or kept by ``commit``."""
        self._forks.append(Fork.open(len(self._journal or ()), self.queues.values()))
        if self._journal is None:
            self._journal = []

    def revert(self) -> None:
        """Undo every change since the latest ``fork``, newest first, and close it."""
        fork = self._open_fork()
        journal = self._journal
        assert journal is not None
        self._journal = None  # the undoing moves are not recorded
        for task, status, node, gpus in reversed(journal[fork.start :]):
            self.move(task, status, node, gpus)
        del journal[fork.start :]
        fork.restore_queues()
        self._journal = journal if self._forks else None

    def commit(self) -> None:
        """Keep the changes since the latest ``fork`` and close it (an enclosing fork may
        still undo them)."""
        self._open_fork()
        if not self._forks:
            self._journal = None

    @contextmanager
    def forked(self) -> Iterator[None]:
        """A fork for the ``with`` block, reverted when it ends (also on an exception)."""
        self.fork()
        try:
            yield
        finally:
            self.revert()

    @property
    def is_forked(self) -> bool:
        """True while a fork is open."""
        return bool(self._forks)

    def _open_fork(self) -> Fork:
        if not self._forks:
            raise EngineInvariantError("revert or commit without an open fork")
        return self._forks.pop()

    def _unforked(self, change: str) -> None:
        if self._forks:
            raise EngineInvariantError(f"cannot {change} while the snapshot is forked")

    # -- helpers ----------------------------------------------------------------------

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

    def label_column(self, key: str) -> NDArray[np.object_]:
        """Every node's value of label ``key`` (None where absent), cached."""
        return self._labels.column(key)

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
            self._unforked("open or close a node")
            if self.epoch is not None:
                self.epoch += 1
            self.schedulable.flags.writeable = True
            self.schedulable[node] = schedulable
            self.schedulable.flags.writeable = False
            self._total = None

    def set_datasets(self, node: int, datasets: frozenset[str]) -> None:
        """Say which datasets node ``node``'s cache holds now (``Node.datasets``): a fill
        landed, an entry was evicted. Counts as a change that can let a waiting job run."""
        current = self.nodes[node]
        if current.datasets != datasets:
            self._unforked("change what a node's cache holds")
            if self.epoch is not None:
                self.epoch += 1
            self.nodes = (
                *self.nodes[:node],
                replace(current, datasets=datasets),
                *self.nodes[node + 1 :],
            )

    def leaf_queues(self) -> list[QueueInfo]:
        """Leaf queues, by name."""
        return [q for q in self.queues.values() if q.is_leaf and q is not self.root]


def _cordoned(
    cards: Cards, capacity: NDArray[np.float64], dim: Mapping[str, int], unit: Vector
) -> NDArray[np.float64]:
    """Per node (rows over ``dim`` like ``capacity``, in engine units), what its cordoned
    cards take out of it, as Kubernetes' allocatable drops by an unhealthy device: a GPU
    each, and where the node counts ``gpu-memory``, the card's memory (its share of the
    node's when its cards' memory is unknown); never more than the node has."""
    out = np.zeros_like(capacity)
    gpu, memory = dim.get(GPU), dim.get(GPU_MEMORY)
    if gpu is not None:
        out[:, gpu] = cards.cordoned.sum(axis=1) * unit[gpu]
    if memory is not None:
        even = capacity[:, memory] / np.maximum(cards.count, 1)
        listed = cards.memory_capacity * unit[memory]
        each = np.where(listed > 0, listed, even[:, None])
        out[:, memory] = np.rint(np.where(cards.cordoned, each, 0.0).sum(axis=1))
    cut: NDArray[np.float64] = np.minimum(out, capacity)
    return cut
