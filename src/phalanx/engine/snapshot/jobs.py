"""Reading jobs into a snapshot: their roles' request rows and card shapes, their tasks'
statuses, and the charges of what those tasks already hold (node arrays, cards, the
queue tree, the user). A job that cannot be tracked becomes an orphan with a reason.

Used by ``Snapshot.build`` (every live job, node arrays charged at once) and
``Snapshot.add_job`` (one job arriving in a snapshot a driver keeps).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

import numpy as np

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job
from phalanx.domain.resources import GPU
from phalanx.engine.snapshot.cardbridge import hold_cards
from phalanx.engine.snapshot.tasks import (
    EVICTABLE,
    PHASE_FACTS,
    READY,
    JobInfo,
    RoleInfo,
    TaskInfo,
    TaskStatus,
)

if TYPE_CHECKING:
    from phalanx.engine.cards import CardDemand, Cards
    from phalanx.engine.snapshot.cluster import Snapshot
    from phalanx.engine.snapshot.queues import QueueInfo


class JobWatcher(Protocol):
    """Told of the jobs a snapshot starts or stops tracking (``Snapshot.watch_jobs``)."""

    def joined(self, snapshot: Snapshot, job: JobInfo) -> None: ...

    def left(self, job: JobInfo) -> None: ...


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (if it runs) for a burst of long-lived objects."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Placements:
    """Rows to add to the node arrays, collected while jobs are read, applied at once."""

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.requests: list[int] = []  # index into the snapshot's request rows
        self.releasing: list[int] = []

    def add_releasing(self, node: int, request: int) -> None:
        self.releasing.append(len(self.nodes))
        self.nodes.append(node)
        self.requests.append(request)

    def apply(self, snapshot: Snapshot) -> None:
        if not self.nodes:
            return
        nodes = np.array(self.nodes, dtype=np.intp)
        rows = snapshot.requests.table()[np.array(self.requests, dtype=np.intp)]
        np.add.at(snapshot.used, nodes, rows)
        np.add.at(snapshot.task_count, nodes, 1)
        snapshot.changes += 1
        snapshot.node_changes[nodes] = snapshot.changes
        if self.releasing:
            picked = np.array(self.releasing, dtype=np.intp)
            np.add.at(snapshot.releasing, nodes[picked], rows[picked])
            np.add.at(snapshot.releasing_tasks, nodes[picked], 1)


def _roles(snapshot: Snapshot, job: Job) -> list[RoleInfo] | None:
    """The job's roles with their request rows and card shapes; None (an orphan) when a
    role's GPU request cannot be served by cards."""
    roles = []
    multi_node = sum(r.replicas for r in job.roles if r.resources.get(GPU) >= 1) > 1
    requests = snapshot.requests
    for i, role in enumerate(job.roles):
        row = requests.intern(role.resources)
        try:
            cards = requests.demand(row, multi_node=multi_node)
        except ValueError as error:
            snapshot.orphans.append(
                (
                    job,
                    f"role {role.name} asks for {error}; fix: ask for gpu below 1 "
                    "(a share) or a whole number of GPUs",
                )
            )
            return None
        roles.append(RoleInfo(role, i, requests.rows[row], job.name, cards, row))
    return roles


def read_job(snapshot: Snapshot, job: Job, placements: Placements) -> JobInfo | None:
    """Track ``job`` in ``snapshot``; what its tasks hold on nodes is added to
    ``placements`` (charged to the node arrays when they are applied). None: an orphan
    (its queue, then its resources, then its roles' GPU requests are checked, in that
    order)."""
    queue = _leaf_queue(snapshot, job)
    if queue is None or not _offered(snapshot, job):
        return None
    roles = _roles(snapshot, job)
    if roles is None:
        return None
    info = JobInfo(job, queue, roles)
    charged = _read_tasks(snapshot, job, info, placements)
    for role, count in zip(roles, charged, strict=True):
        if count:
            info.allocated += role.request * count
    _track(snapshot, info)
    return info


def _leaf_queue(snapshot: Snapshot, job: Job) -> QueueInfo | None:
    """The leaf queue the job is submitted to; None (the job recorded as an orphan) when
    that queue does not exist, is not a leaf or is the root."""
    queue = snapshot.queues.get(job.queue)
    if queue is None or not queue.is_leaf or queue is snapshot.root:
        snapshot.orphans.append(
            (
                job,
                f"queue {job.queue!r} does not exist or is not a leaf queue; "
                "fix: create it, or submit to an existing leaf queue",
            )
        )
        return None
    return queue


def _offered(snapshot: Snapshot, job: Job) -> bool:
    """Whether some node offers every resource the job's roles ask for; when not, the job
    is recorded as an orphan, the resources no node offers named in sorted order."""
    unknown = sorted(
        {n for r in job.roles for n, v in r.resources.items() if v and n not in snapshot.dim}
    )
    if unknown:
        snapshot.orphans.append(
            (
                job,
                f"it asks for {', '.join(unknown)}, which no node offers; "
                "fix: remove that request or add nodes that have it",
            )
        )
        return False
    return True


def _read_tasks(snapshot: Snapshot, job: Job, info: JobInfo, placements: Placements) -> list[int]:
    """Add a ``TaskInfo`` for each of the job's tasks to ``info`` (its ``tasks``,
    ``counts`` and ``ready_count``): a task on a node adds its request row to
    ``placements`` and holds its cards there; a task on a node the snapshot lacks is
    pending (reported lost). Returns how many tasks of each role (indexed like
    ``info.roles``) are charged. Raises ``InvalidInput`` at the first task that names a
    role the job does not have."""
    roles = info.roles
    by_name = {role.name: role for role in roles}
    charged = [0] * len(roles)
    node_index, counts, tasks = snapshot.node_index, info.counts, info.tasks
    placed_nodes, placed_requests = placements.nodes, placements.requests
    cards = snapshot.cards
    for task in job.all_tasks():
        role = by_name.get(task.role)
        if role is None:
            raise InvalidInput(
                f"task {task.role}-{task.index} names a role the job does not have",
                field=f"jobs.{job.name}.tasks",
                fix=f"use one of: {', '.join(by_name)}",
            )
        status, on_node, is_charged = PHASE_FACTS[task.phase]
        node = -1 if task.node is None else node_index.get(task.node, -1)
        if on_node:
            if node < 0:
                status, is_charged = TaskStatus.PENDING, False  # node gone: reported lost
            elif status is TaskStatus.RELEASING:
                placements.add_releasing(node, role.row)
            else:
                placed_nodes.append(node)
                placed_requests.append(role.row)
        held = TaskInfo(info, role, task.index, status, node, task.start_time, ())
        if on_node and node >= 0 and role.cards is not None:
            _hold_cards(cards, held, role.cards, task.gpus)
        tasks.append(held)
        counts[status] += 1
        if status in READY:
            info.ready_count += 1
        if is_charged:
            charged[role.index] += 1
    return charged


def _hold_cards(cards: Cards, held: TaskInfo, demand: CardDemand, gpus: Sequence[int]) -> None:
    """Give a task on a node (``held.node``) the cards ``demand`` asks for, ``gpus`` where
    they serve (``hold_cards``); a releasing task's cards are also marked releasing."""
    hold_cards(cards, held, held.node, gpus)
    if held.status is TaskStatus.RELEASING and held.gpus:
        cards.releasing(demand, held.node, held.gpus, 1)


def _track(snapshot: Snapshot, info: JobInfo) -> None:
    """List a job read in (its tasks' counts and ``allocated`` set) with its queue,
    charging the queue, its ancestors and its user."""
    queue = info.queue
    queue.jobs[info] = None
    if info.spec.preemptible:
        queue.evictable.update((t, None) for t in info.tasks if t.status in EVICTABLE)
    for ancestor in queue.ancestors:
        ancestor.allocated += info.allocated
    user = (queue.name, info.user)
    if user not in snapshot.user_allocated:
        snapshot.user_allocated[user] = np.zeros(len(snapshot.dims))
    snapshot.user_allocated[user] += info.allocated
    snapshot.jobs[info.name] = info
    if info.counts[TaskStatus.PENDING]:
        snapshot.waiting[info.name] = info
    if info.spec.elastic_role() is not None:
        snapshot.elastic[info.name] = info
