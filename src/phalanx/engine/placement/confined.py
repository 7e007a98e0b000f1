"""Gang placement confined to the node masks a plugin offers (see ``framework.confinement``),
and the room such an offer is made on (``free_room``).

Guarantees, on top of ``try_job``'s:

- Whole gang: each offered mask is tried in its own statement; a failed attempt is
  discarded, so the next starts from exactly the snapshot the first saw. The first
  attempt after which the job stands (ready: committed; pipelined: kept) wins.
- Groups: in one statement for the whole gang, the pending tasks (role, then index
  order) are placed ``group`` at a time, each group inside one mask of the offer made
  for it given what earlier groups took; a group that fits in no mask is rolled back
  to where it started and ends the walk. The gang then stands or is discarded whole.
- GPU types: a job held to one GPU type (``gputypes``) tries each offered mask with its
  type, or with each type its gang (or group) fits on there in turn; its later groups
  keep to the type its earlier ones took. Without a rule, the one mask is every node.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.confinement import Confinement, ConfinementQuery
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import Statement
from phalanx.engine.placement.gangs import gang_reason
from phalanx.engine.placement.gputypes import Tries, Typing, fixed_tries, tries_for, typing_of
from phalanx.engine.placement.tasks import Outcome, place_tasks, settle
from phalanx.engine.snapshot import JobInfo, Snapshot, TaskInfo, Vector


def place_confined(
    session: Session,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    rule: Confinement | None,
    *,
    typing: Typing | None = None,
    withheld: Vector | None,
    allow_pipeline: bool,
) -> Reason | None:
    """Place ``tasks`` (``job``'s pending ones) under ``rule`` (None: anywhere) and, with
    ``typing``, on one GPU type (``gputypes``: each offered mask tried with the job's
    type, or with each type the gang fits on there, in turn); None when the placements
    stand, else the job's reason (nothing of the attempts is left behind)."""
    if rule is None or rule.group is None:
        return _whole(session, job, tasks, rule, typing, withheld, allow_pipeline)
    return _grouped(session, job, tasks, rule, typing, rule.group, withheld, allow_pipeline)


def _tries(
    session: Session,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    rule: Confinement | None,
    typing: Typing | None,
    withheld: Vector | None,
    allow_pipeline: bool,
) -> Tries:
    if rule is None:
        fixed = fixed_tries(typing, tasks, (None,))
        if fixed is not None:  # no room to count
            return fixed
    free, slots = free_room(session.snapshot, withheld=withheld, allow_pipeline=allow_pipeline)
    if rule is None:
        return tries_for(session, typing, tasks, (None,), free, slots)
    offer = rule.offer(ConfinementQuery(job=job, tasks=tasks, free=free, slots=slots))
    found = tries_for(session, typing, tasks, offer.masks, free, slots)
    return Tries(tries=found.tries, reason=found.reason or offer.reason)


def _whole(
    session: Session,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    rule: Confinement | None,
    typing: Typing | None,
    withheld: Vector | None,
    allow_pipeline: bool,
) -> Reason | None:
    offer = _tries(session, job, tasks, rule, typing, withheld, allow_pipeline)
    reason = offer.reason
    for mask, typed in offer.tries:
        with session.statement() as stmt:
            outcome = place_tasks(
                session,
                stmt,
                tasks,
                allow_pipeline=allow_pipeline,
                withheld=withheld,
                within=mask,
                typed=typed,
            )
            if settle(session, job, stmt, outcome):
                return None
        reason = gang_reason(job, outcome.allocated + outcome.pipelined, outcome.reason)
    return reason or _nowhere(len(tasks))


def _grouped(
    session: Session,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    rule: Confinement,
    typing: Typing | None,
    size: int,
    withheld: Vector | None,
    allow_pipeline: bool,
) -> Reason | None:
    ordered = sorted(tasks, key=lambda t: (t.role.index, t.index))
    count = -(-len(ordered) // size)
    allocated = pipelined = 0
    failure: Reason | None = None
    with session.statement() as stmt:
        for number in range(count):
            group = ordered[number * size : (number + 1) * size]
            if typing is not None:  # the groups placed so far pin the job's type
                typing = typing_of(session, job)
            outcome = _place_group(
                session, stmt, job, group, rule, typing, withheld, allow_pipeline
            )
            allocated += outcome.allocated
            pipelined += outcome.pipelined
            if outcome.reason is not None:
                failure = (
                    outcome.reason if count == 1 else _in_group(outcome.reason, number + 1, count)
                )
                break
        if settle(session, job, stmt, Outcome(allocated, pipelined, failure)):
            return None
    return gang_reason(job, allocated + pipelined, failure)


def _place_group(
    session: Session,
    stmt: Statement,
    job: JobInfo,
    group: Sequence[TaskInfo],
    rule: Confinement,
    typing: Typing | None,
    withheld: Vector | None,
    allow_pipeline: bool,
) -> Outcome:
    """Every task of ``group`` inside one offered mask, or none of them (with the reason)."""
    offer = _tries(session, job, group, rule, typing, withheld, allow_pipeline)
    reason = offer.reason
    for mask, typed in offer.tries:
        mark = stmt.savepoint()
        outcome = place_tasks(
            session,
            stmt,
            group,
            allow_pipeline=allow_pipeline,
            withheld=withheld,
            within=mask,
            typed=typed,
        )
        if outcome.reason is None:
            return outcome
        stmt.rollback(mark)
        reason = outcome.reason
    return Outcome(0, 0, reason or _nowhere(len(group)))


def _in_group(reason: Reason, number: int, count: int) -> Reason:
    return Reason(
        code=reason.code,
        message=f"group {number} of {count}: {reason.message}",
        resource=reason.resource,
        queue=reason.queue,
        node=reason.node,
        shortfall=reason.shortfall,
    )


def _nowhere(tasks: int) -> Reason:
    return Reason(
        code=ReasonCode.GANG,
        message=f"no nodes were offered for {tasks} task(s); "
        "fix: check the plugins that confine the job's placement",
    )


def free_room(
    snapshot: Snapshot, *, withheld: Vector | None, allow_pipeline: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per node: what tasks may still use (as ``ClassPlacer`` counts it), and free slots."""
    now = snapshot.capacity - snapshot.used
    if withheld is not None:
        now -= withheld
    future = now + snapshot.releasing - snapshot.pipelined
    free = future if allow_pipeline else np.minimum(now, future)
    free.flags.writeable = False
    slots = snapshot.max_tasks - snapshot.task_count
    slots.flags.writeable = False
    return free, slots
