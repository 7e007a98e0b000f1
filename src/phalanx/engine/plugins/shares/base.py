"""The base of the queue-share plugins (``capacity``, ``proportion``): what they share
once a subclass has given each queue its deserved share.

Guarantees, for a queue that is not ``overcommit``:
- a task is allocatable only if the queue and every ancestor stay within capability;
- a job is enqueueable only if its minimum fits under every ancestor's capability
  together with what is allocated and already admitted, or eviction can make it fit
  there: reclaim, when the job's queues below that ancestor stay within their
  deserved share with it, or preemption of its own queue's lower-priority work;
- a victim is reclaimable only if its queue borrows (is above deserved in a resource
  the reclaimer needs), stays at or above its guarantee after the eviction, the
  reclaimer stays within its own deserved share, and, to rule out eviction ping-pong,
  when the eviction leaves the victim queue below its deserved share, the reclaimer's
  share afterwards does not exceed the victim queue's share afterwards.
Queues are ordered by share (allocated / deserved), compared level by level from the root.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.extension import Vote
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.shares import QueueShares
from phalanx.engine.framework.wording import speak
from phalanx.engine.placement.eviction.victims import fits_deserved, preemption_covers
from phalanx.engine.snapshot import EPSILON, JobInfo, QueueInfo, TaskInfo, Vector


def water_fill(total: Vector, weights: Vector, caps: np.ndarray, floors: np.ndarray) -> np.ndarray:
    """Split ``total`` among rows by ``weights``, each row within [floor, cap], per resource.

    Every row first gets its floor; what remains is handed out in proportion to weight
    among rows still under their cap, round after round, until nothing remains or
    every row is capped. Never hands out more than ``total`` beyond the floors.
    """
    give = np.minimum(floors, caps).astype(np.float64)
    remaining = np.maximum(total - give.sum(axis=0), 0.0)
    for _ in range(len(weights) + 1):
        active = caps > give + EPSILON
        share_weights = weights[:, None] * active
        weight_sum = share_weights.sum(axis=0)
        if not np.any((weight_sum > 0) & (remaining > EPSILON)):
            break
        portion = np.divide(
            share_weights, weight_sum, out=np.zeros_like(share_weights), where=weight_sum > 0
        )
        grown = np.minimum(give + remaining * portion, caps)
        remaining = np.maximum(remaining - (grown - give).sum(axis=0), 0.0)
        give = grown
    result: np.ndarray = give
    return result


def share(queue: QueueInfo, allocated: Vector, dims: np.ndarray | None = None) -> float:
    """Largest allocated / deserved over ``dims`` (every resource when None).

    Holding any amount of a resource it deserves none of is an infinite share, and so
    is deserving nothing at all: such a queue only ever gets what nobody else wants.
    """
    deserved = queue.deserved if dims is None else queue.deserved[dims]
    used = allocated if dims is None else allocated[dims]
    entitled = deserved > 0
    if not entitled.any():
        return np.inf
    if bool((used[~entitled] > EPSILON).any()):
        return np.inf
    return float((used[entitled] / deserved[entitled]).max())


class QueueSharePlugin(Plugin[Session]):
    """Base of the queue-share plugins: a subclass sets each queue's ``deserved``
    (``compute_deserved``); the base publishes the shares (``Session.shares``), limits
    queues by capability, orders them by share, admits jobs and picks reclaim victims by
    those shares (the module's guarantees). Its state is the session itself."""

    def compute_deserved(self, session: Session) -> None:
        """Fill ``deserved`` for every queue of the snapshot."""
        raise NotImplementedError

    def open(self, session: Session) -> Session:
        snapshot = session.snapshot
        # the root holds at most what schedulable nodes offer now (nodes come and go)
        written = snapshot.vector(snapshot.root.spec.capability, missing=np.inf)
        snapshot.root.capability = np.minimum(written, snapshot.total)
        self.compute_deserved(session)
        session.publish_shares(QueueShares.of(self.name, snapshot.queues.values()))
        return session

    def queue_order(self, state: Session, queue: QueueInfo) -> tuple[float, ...]:
        """By share, compared level by level from the root."""
        return tuple(share(q, q.allocated) for q in reversed(queue.ancestors[:-1]))

    def reclaimable(
        self, state: Session, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        return _reclaimable(reclaimer, candidates)

    def allocatable(self, session: Session, task: TaskInfo) -> str | None:
        leaf = task.job.queue
        if leaf.spec.overcommit:
            return None
        request = task.request
        for queue in leaf.ancestors[:-1]:
            if queue.uncapped:
                continue
            over = queue.allocated + request > queue.capability + EPSILON
            if over.any():
                never = _never_fits(session, task.job, queue)
                if never is not None:
                    return never
                return (
                    f"queue {session.queue_label(queue)} is at its capability of "
                    f"{session.describe(np.where(over, queue.capability, 0))} "
                    f"({session.describe(np.where(over, queue.allocated, 0))} allocated; the "
                    f"task needs {session.describe(np.where(over, request, 0))}); "
                    "fix: wait for its jobs to finish, or raise the queue's capability"
                )
        return None

    def job_enqueueable(self, session: Session, job: JobInfo) -> Vote:
        leaf = job.queue
        if leaf.spec.overcommit:
            return Vote.PERMIT
        minimum = job.min_request()
        for depth, queue in enumerate(leaf.ancestors[:-1]):
            over = queue.allocated + queue.inqueue + minimum > queue.capability + EPSILON
            if not over.any():
                continue
            never = _never_fits(session, job, queue)
            if never is not None:
                reason = Reason(code=ReasonCode.QUEUE_LIMIT, message=never, queue=queue.name)
                session.record_reason(job, reason)
                return Vote.REJECT
            if not _evictions_can_fit(job, leaf.ancestors[:depth], minimum):
                session.record_reason(
                    job,
                    Reason(
                        code=ReasonCode.QUEUE_LIMIT,
                        message=f"queue {session.queue_label(queue)} cannot hold the job's "
                        f"minimum of {session.describe(np.where(over, minimum, 0))} under its "
                        f"capability of {session.describe(np.where(over, queue.capability, 0))} "
                        f"({session.describe(np.where(over, queue.allocated + queue.inqueue, 0))}"
                        " held or admitted); fix: wait for its jobs to finish, raise the "
                        "capability, or lower minAvailable",
                        queue=queue.name,
                    ),
                )
                return Vote.REJECT
        return Vote.PERMIT


def _never_fits(session: Session, job: JobInfo, queue: QueueInfo) -> str | None:
    """The reason a job can never run under ``queue`` (its minimum is over the queue's
    capability even with the queue empty), or None when waiting can help."""
    minimum = job.min_request()
    over = minimum > queue.capability + EPSILON
    if not over.any():
        return None
    tasks = job.min_available
    return (
        f"never fits: the job's minimum of {tasks} task{'' if tasks == 1 else 's'} needs "
        f"{speak(session.snapshot, minimum, dims=over)} but queue {session.queue_label(queue)} "
        f"has a capability of {speak(session.snapshot, queue.capability, dims=over)}; "
        "waiting will not help; fix: submit a smaller job (fewer or smaller tasks, or a "
        "lower minAvailable) or raise the queue's capability"
    )


def _evictions_can_fit(job: JobInfo, below: tuple[QueueInfo, ...], minimum: Vector) -> bool:
    """Whether eviction could bring ``minimum`` under a capped queue above ``below``.

    ``below`` are the job's queues strictly under the capped one (empty when the capped
    queue is the job's own). Reclaim can take back what other queues under it borrowed
    when every queue of ``below`` stays within its deserved share with the job;
    preemption can free lower-priority, preemptible work of the job's own queue.
    """
    return (bool(below) and fits_deserved(below, minimum)) or preemption_covers(job, minimum)


def _branches(
    reclaimer: QueueInfo, victim: QueueInfo
) -> tuple[tuple[QueueInfo, ...], tuple[QueueInfo, ...]]:
    """Ancestors of each side strictly below their lowest common ancestor (leaf first)."""
    common = set(map(id, reclaimer.ancestors)) & set(map(id, victim.ancestors))
    mine = tuple(q for q in reclaimer.ancestors if id(q) not in common)
    theirs = tuple(q for q in victim.ancestors if id(q) not in common)
    return mine, theirs


def _reclaimable(reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The candidates ``reclaimer`` may take back, in the order offered.

    Cost: O(candidates) numpy steps, and none when the reclaimer's own (leaf) queue would
    pass its deserved share with the task: that queue is on the reclaimer's side of every
    victim's branch (a victim of the same queue is never reclaimed), so nothing is
    accepted. That is the case of every job of a queue at its share when thousands wait:
    each is answered at once instead of each judging every running task of other queues.
    Which branches a victim's queue gives is worked out once per queue.
    """
    request = reclaimer.request
    needed = np.flatnonzero(request > 0)
    leaf = reclaimer.job.queue
    if not _entitled(leaf, request, needed):
        return []
    freed: dict[int, Vector] = {}
    accepted: list[TaskInfo] = []
    branches: dict[int, tuple[tuple[QueueInfo, ...], tuple[QueueInfo, ...]] | None] = {}
    for victim in candidates:
        key = id(victim.job.queue)
        if key not in branches:
            mine, theirs = _branches(leaf, victim.job.queue)
            entitled = all(_entitled(q, request, needed) for q in mine)
            # None: not entitled to more against this victim's branch of the tree
            branches[key] = (mine, theirs) if mine and theirs and entitled else None
        found = branches[key]
        if found is None:
            continue
        mine, theirs = found
        if _victim_ok(victim, theirs, mine[-1], request, needed, freed):
            accepted.append(victim)
            for q in theirs:
                freed[id(q)] = freed.get(id(q), 0.0) + victim.request
    return accepted


def _entitled(queue: QueueInfo, request: Vector, needed: np.ndarray) -> bool:
    """Whether ``queue`` stays within its deserved share in ``needed`` with ``request``."""
    return bool(
        (queue.allocated[needed] + request[needed] <= queue.deserved[needed] + EPSILON).all()
    )


def _victim_ok(
    victim: TaskInfo,
    theirs: tuple[QueueInfo, ...],
    my_top: QueueInfo,
    request: Vector,
    needed: np.ndarray,
    freed: dict[int, Vector],
) -> bool:
    overlap = np.flatnonzero((victim.request > 0) & (request > 0))
    if overlap.size == 0:
        return False
    for q in theirs:
        if not q.spec.reclaimable:
            return False
        current = q.allocated - freed.get(id(q), 0.0)
        after = current - victim.request
        if not bool((current[overlap] > q.deserved[overlap] + EPSILON).any()):
            return False  # not borrowing what the reclaimer needs
        if not bool((after + EPSILON >= q.guarantee).all()):
            return False  # would push the queue below its guarantee
    victim_top = theirs[-1]
    after_victim = victim_top.allocated - freed.get(id(victim_top), 0.0) - victim.request
    if bool((after_victim[needed] + EPSILON >= victim_top.deserved[needed]).all()):
        return True  # still at or above its share afterwards: it has no claim to take back
    return (
        share(my_top, my_top.allocated + request, needed)
        <= share(victim_top, after_victim, needed) + EPSILON
    )
