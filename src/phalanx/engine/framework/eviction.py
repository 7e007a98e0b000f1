"""Making room for one task by evicting others: shared by reclaim and preempt.

Guarantees: victims are evicted only on a node where the task then fits (with the
resources being released counted), in victim order, and only as many as needed; a
victim job that would drop below its minAvailable is evicted whole, and only when
every one of its tasks is an accepted victim. Nothing is evicted when the task
cannot fit anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import Statement
from phalanx.engine.snapshot import EPSILON, EVICTABLE, TaskInfo

#: Given the task that needs room and a victim set, the victims the plugins accept.
Judge = Callable[[TaskInfo, Sequence[TaskInfo]], Sequence[TaskInfo]]


def make_room(
    session: Session,
    stmt: Statement,
    task: TaskInfo,
    candidates: Sequence[TaskInfo],
    judge: Judge,
    *,
    action: str,
) -> bool:
    """Evict accepted victims on the best node and pipeline ``task`` there; False if impossible."""
    victims = list(judge(task, candidates)) if candidates else []
    snap = session.snapshot
    mask, _ = session.static_mask(task.role)
    request = task.request
    need = np.flatnonzero(request > 0)
    freeable = np.zeros_like(snap.capacity)
    nodes = np.array([v.node for v in victims], dtype=np.intp)
    if victims:
        np.add.at(freeable, nodes, np.array([v.request for v in victims]))
    free = snap.future_idle
    fits = mask & (free[:, need] + freeable[:, need] + EPSILON >= request[need]).all(axis=1)
    fits &= snap.task_count - np.bincount(nodes, minlength=len(snap.nodes)) < snap.max_tasks
    order = np.flatnonzero(fits)
    if order.size == 0:
        return False
    # cheapest node first: the least room to free, then node order
    lack = np.maximum(request - free[order], 0.0)[:, need].sum(axis=1)
    ranked = order[np.lexsort((order, lack))]
    key = session.points.victim_order.key
    for node in ranked[:8]:
        on_node = sorted(
            (v for v in victims if v.node == node),
            key=lambda v: (key(v), -(v.start_time or 0.0), v.name),
        )
        if _evict_until_fits(session, stmt, task, on_node, judge, action, int(node)):
            stmt.pipeline(task, int(node))
            return True
    return False


def _evict_until_fits(
    session: Session,
    stmt: Statement,
    task: TaskInfo,
    on_node: list[TaskInfo],
    judge: Judge,
    action: str,
    node: int,
) -> bool:
    snap = session.snapshot
    request = task.request
    need = np.flatnonzero(request > 0)
    mark = len(stmt.operations)
    for victim in on_node:
        if (snap.future_idle[node, need] + EPSILON >= request[need]).all():
            return True
        if victim.status not in EVICTABLE:
            continue
        group = _gang_group(victim)
        if len(judge(task, group)) != len(group):
            continue
        for member in group:
            reason = f"{action}ed for {task.job.name} ({task.name}) of queue {task.job.queue.name}"
            stmt.evict(member, action=action, by=task.job.name, reason=reason)
    if (snap.future_idle[node, need] + EPSILON >= request[need]).all():
        return True
    _undo_since(session, stmt, mark)
    return False


def _gang_group(victim: TaskInfo) -> list[TaskInfo]:
    """The victim alone if its job can shrink, else every evictable task of its job."""
    job = victim.job
    if job.ready_count - 1 >= job.min_available:
        return [victim]
    return [t for t in job.tasks if t.status in EVICTABLE]


def _undo_since(session: Session, stmt: Statement, mark: int) -> None:
    """Roll back evictions made on a node that turned out not to suffice."""
    while len(stmt.operations) > mark:
        op = stmt.operations.pop()
        session.undo_evict(op.task, op.previous)
