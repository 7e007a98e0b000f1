"""Making room for a waiting gang by evicting others, all or nothing (preempt, reclaim).

``evict_for_gang`` offers the victims a finder gives (same-queue lower-priority work for
preempt, other queues' borrowed work for reclaim) to the plugins in victim order; a
victim gang is shrunk to its minAvailable or evicted whole. The gang's tasks are
pipelined onto the freed nodes; if the gang cannot be completed, every eviction is
undone. A confined job keeps to its confinement: where it has ``evict_within``, room
is made only on the nodes that allows; otherwise inside the node masks it offers
with the victims' room counted as free (a hard ``network-topology`` gang, or each of
its groups, under one switch), each mask tried in the offer's order. A job held to one
GPU type (``gputypes``) gets room on its type once pinned, else on each type its gang
fits on with the victims counted gone, in turn, each try undone when it fails. When
what binds is a queue limit (the queue, or an ancestor, at its capability) rather than
node room, victims under that queue are evicted first, only until the limit admits the
task. A ``budget`` caps what the victims may hold together: that many times what the
gang's pending tasks ask for, in every resource.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.confinement import Confinement, ConfinementQuery
from phalanx.engine.framework.extension import VictimPoint
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import OpKind, Statement
from phalanx.engine.placement.confined import free_room
from phalanx.engine.placement.eviction.victims import (
    Judge,
    evict_with_gang,
    held_per_node,
    in_victim_order,
    make_room,
    past,
    undo_since,
)
from phalanx.engine.placement.gangs import gang_shape
from phalanx.engine.placement.gputypes import TypeMask, asks_gpus, tries_for, typing_of
from phalanx.engine.snapshot import EVICTABLE, JobInfo, TaskInfo, Vector


def evict_for_gang(
    session: Session,
    job: JobInfo,
    find_victims: Callable[[JobInfo], Sequence[TaskInfo]],
    *,
    action: str,
    budget: float = math.inf,
    judge: Judge | None = None,
) -> bool:
    """Make room for ``job``'s pending tasks until its gang is pipelined; all or nothing.

    Victims (``find_victims(job)``) are offered to the plugins in victim order, so a
    filter that accepts only as many as a queue can spare (quota) keeps the first
    victims (overcommitted work); ``judge`` replaces the plugins' (preemptable for
    preempt, else reclaimable) when given. A job equivalent to one that failed earlier in
    the session fails without a search (see ``Session.eviction_failed``): the same shape,
    priority and confinement, and either the same judged order key or, where the plugins
    judge each victim on its own, the same victims, the same user and the same victims
    accepted for each pending task (``_accepted_each``).
    """
    tasks = sorted(
        job.pending_tasks(), key=lambda t: (session.points.task_order.key(t), t.role.index, t.index)
    )
    rule = session.points.confinement(job) if session.points.confinement else None
    confined = None if rule is None else rule.key  # the same gang confined otherwise may fit
    typing = typing_of(session, job)
    typed = None if typing is None else typing.key  # so may one held to another type
    shape = (action, gang_shape(job, tasks), job.priority, confined, typed)
    # a place in line alone judges nothing
    ordered = (*shape, session.points.job_order.judged_key(job))
    if session.eviction_failed(ordered):
        return False
    victims = find_victims(job)
    if judge is None:
        judge = session.points.preemptable if action == "preempt" else session.points.reclaimable
    accepted = _accepted_each(judge, tasks, victims)
    # the victims themselves count too: room is sought where the gang fits with all gone
    judged = None if accepted is None else (*shape, job.user, frozenset(victims), accepted)
    if judged is not None and session.eviction_failed(judged):
        return False
    if (
        victims
        and (accepted is None or any(accepted))
        and _evict_for_tasks(session, job, tasks, victims, action, budget, judge)
    ):
        return True
    session.remember_eviction_failure(ordered)
    if judged is not None:
        session.remember_eviction_failure(judged)
    return False


def _accepted_each(
    judge: Judge, tasks: Sequence[TaskInfo], victims: Sequence[TaskInfo]
) -> tuple[frozenset[TaskInfo], ...] | None:
    """The victims the plugins accept for each of ``tasks``, where they judge each victim
    on its own (``VictimPoint.in_any_order``); None where they weigh candidates together.

    What a search for room depends on beyond the gang's shape, priority, confinement,
    user (whose limits the queue-limit step asks) and victims: every judge call it makes
    offers a subset of ``victims`` for one of ``tasks``, and such plugins accept of a
    subset what they accept of the whole. So two preemptors alike in those and in this
    answer fail or succeed alike, whatever their places in line (Tiresias' within-level
    order gives every waiting job its own, so a memo keyed by it served none: each
    searched in full, every session). And where it accepts nothing for any task, no
    search can evict anything: the search is skipped with the same outcome. One judge
    call per pending task, O(tasks x victims).
    """
    if not (isinstance(judge, VictimPoint) and judge.in_any_order):
        return None
    if not victims:
        return (frozenset(),) * len(tasks)
    return tuple([frozenset(judge(task, victims)) for task in tasks])


def _evict_for_tasks(
    session: Session,
    job: JobInfo,
    tasks: list[TaskInfo],
    victims: Sequence[TaskInfo],
    action: str,
    budget: float,
    judge: Judge | None,
) -> bool:
    if judge is None:
        judge = session.points.preemptable if action == "preempt" else session.points.reclaimable
    rule = session.points.confinement(job) if session.points.confinement else None
    # what the victims may hold together: budget x what the pending tasks ask for
    scope = budget * np.sum([t.request for t in tasks], axis=0) if math.isfinite(budget) else None
    room = _Room(session, job, victims, judge, action, scope)
    with session.statement() as stmt:
        for typed in _types_with_victims(session, job, tasks, victims):
            mark = stmt.savepoint()
            if rule is None or rule.evict_within is not None:
                room.make(stmt, tasks, rule, None, typed)
            else:
                _room_in_offers(session, stmt, room, tasks, rule, typed)
            if session.job_pipelined(job):
                break
            stmt.rollback(mark)
        if session.job_pipelined(job) and any(op.kind is OpKind.EVICT for op in stmt.operations):
            stmt.commit()
            session.record_reason(
                job,
                Reason(
                    code=ReasonCode.WAITING_FOR_RELEASE,
                    message=f"{action}: room is being freed for it; it starts once the evicted tasks are gone",
                ),
            )
            session.explain(
                f"{action}: made room for {job.name} by evicting "
                f"{sum(op.kind is OpKind.EVICT for op in stmt.operations)} task(s)"
            )
            return True
        stmt.discard()
    return False


@dataclass(frozen=True, slots=True)
class _Room:
    """How room is made for one job's tasks: its victims, their judge, the budget."""

    session: Session
    job: JobInfo
    victims: Sequence[TaskInfo]
    judge: Judge
    action: str
    scope: Vector | None  # what the victims may hold together (None: no bound)

    def make(
        self,
        stmt: Statement,
        tasks: Sequence[TaskInfo],
        rule: Confinement | None,
        mask: NDArray[np.bool_] | None,
        typed: TypeMask | None = None,
    ) -> bool:
        """Evict and pipeline for ``tasks`` one by one (inside ``mask``, when given, and
        for a task asking for GPUs on ``typed``'s nodes); True when each of them got room
        or the job stands pipelined before the last."""
        session, job, victims = self.session, self.job, self.victims
        for task in tasks:
            if not _free_quota(session, stmt, task, victims, self.judge, self.action):
                return False
            # nothing evicted yet in this statement: the victims are all still evictable
            live = [v for v in victims if v.status in EVICTABLE] if stmt.operations else victims
            within = _evict_within(session, job, task, rule)
            if mask is not None:
                within = mask if within is None else within & mask
            if typed is not None and asks_gpus(task.role):
                within = typed.mask if within is None else within & typed.mask
            allowance = None if self.scope is None else self.scope - _evicted(stmt)
            if not make_room(
                session,
                stmt,
                task,
                live,
                self.judge,
                action=self.action,
                within=within,
                allowance=allowance,
            ):
                return False
            if session.job_pipelined(job):
                return True
        return True


def _room_in_offers(
    session: Session,
    stmt: Statement,
    room: _Room,
    tasks: list[TaskInfo],
    rule: Confinement,
    typed: TypeMask | None,
) -> None:
    """Make room for ``tasks`` (each ``rule.group`` of them, or all) inside one of the
    node masks the rule offers when the victims' room is counted as free, each mask tried
    in the offer's order and undone exactly when its tasks do not all get room there."""
    size = rule.group or len(tasks)
    for start in range(0, len(tasks), size):
        group = tasks[start : start + size]
        for mask in _offers_with_victims(session, room.job, group, room.victims, rule):
            mark = stmt.savepoint()
            if room.make(stmt, group, rule, mask, typed):
                break
            stmt.rollback(mark)
        else:
            return
        if session.job_pipelined(room.job):
            return


def _types_with_victims(
    session: Session, job: JobInfo, tasks: Sequence[TaskInfo], victims: Sequence[TaskInfo]
) -> tuple[TypeMask | None, ...]:
    """The GPU types to make room on for ``job``, in turn (``gputypes``): its own once
    pinned, else those its gang fits on when every victim is counted gone, best first;
    ``(None,)`` when it is not held to one type."""
    typing = typing_of(session, job)
    if typing is None:
        return (None,)
    free, slots = _free_with_victims(session, victims)
    return tuple(
        typed for _, typed in tries_for(session, typing, tasks, (None,), free, slots).tries
    )


def _free_with_victims(
    session: Session, victims: Sequence[TaskInfo]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Free room and slots per node as if every evictable victim were gone."""
    snap = session.snapshot
    free, slots = free_room(snap, withheld=None, allow_pipeline=True)
    on_nodes = [v for v in victims if v.status in EVICTABLE]  # not evicted for earlier groups
    held, count = held_per_node(snap, on_nodes, np.arange(len(snap.dims)))
    return free + held, slots + count


def _offers_with_victims(
    session: Session,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    victims: Sequence[TaskInfo],
    rule: Confinement,
) -> tuple[NDArray[np.bool_], ...]:
    """The rule's offer for ``tasks`` as if every victim were gone already: the
    node masks where evictions could make the room placement wants."""
    free, slots = _free_with_victims(session, victims)
    return rule.offer(ConfinementQuery(job=job, tasks=tasks, free=free, slots=slots)).masks


def _evicted(stmt: Statement) -> Vector | float:
    """What the tasks ``stmt`` has evicted so far hold together (0: none)."""
    evicted = [op.task.request for op in stmt.operations if op.kind is OpKind.EVICT]
    if not evicted:
        return 0.0
    held: Vector = np.sum(evicted, axis=0)
    return held


def _evict_within(
    session: Session, job: JobInfo, task: TaskInfo, rule: Confinement | None
) -> NDArray[np.bool_] | None:
    """Where the job's confinement lets evictions make room for ``task`` (None: anywhere)."""
    if rule is None or rule.evict_within is None:
        return None
    free, slots = free_room(session.snapshot, withheld=None, allow_pipeline=True)
    return rule.evict_within(ConfinementQuery(job=job, tasks=(task,), free=free, slots=slots))


def _free_quota(
    session: Session,
    stmt: Statement,
    task: TaskInfo,
    victims: Sequence[TaskInfo],
    judge: Judge,
    action: str,
) -> bool:
    """Evict accepted victims until ``task``'s queue limits admit it; False if they never do.

    Only work under the task's queue or one of its ancestors can lift such a limit, so
    victims are taken from the nearest such queue outwards, each queue's in victim
    order, and a victim gang that would drop below minAvailable goes whole. Nothing is
    evicted when the task is admitted already, and nothing stays evicted on failure.
    """
    if session.points.allocatable(task) is None:
        return True
    mark = len(stmt.operations)
    for scope in task.job.queue.ancestors[:-1]:
        under = [v for v in victims if v.status in EVICTABLE and scope in v.job.queue.ancestors]
        reason = (
            f"{past(action)} for {task.job.name} ({task.name}) of queue "
            f"{task.job.queue.name}: {session.queue_label(scope)} at its limit"
        )
        offered = in_victim_order(session, under)  # a quota's filter keeps the first ones
        for victim in in_victim_order(session, judge(task, offered) if offered else []):
            if not evict_with_gang(stmt, task, victim, judge, action=action, reason=reason):
                continue
            if session.points.allocatable(task) is None:
                return True
    undo_since(session, stmt, mark)
    return False
