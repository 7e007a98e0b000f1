"""Placing a job's pending tasks as one gang, all or nothing: ``try_job``, which the
allocate and backfill actions call. A job a plugin confines (the ``confinement`` point)
is placed by
``confined.place_confined``; any other by ``tasks.place_tasks``."""

from __future__ import annotations

from phalanx.engine.framework.session import Session
from phalanx.engine.placement.confined import place_confined
from phalanx.engine.placement.gangs import gang_reason, gang_shape
from phalanx.engine.placement.gputypes import typing_of
from phalanx.engine.placement.tasks import place_tasks, settle
from phalanx.engine.snapshot import JobInfo, Vector


def try_job(
    session: Session,
    job: JobInfo,
    *,
    withheld: Vector | None = None,
    allow_pipeline: bool = True,
) -> bool:
    """Place ``job``'s pending tasks as one gang; True when its placements stand.

    The statement commits when the job is ready (its binds are dispatched), is kept
    when the job is only pipelined, and is discarded otherwise (all-or-nothing), in
    which case the job's reason says what was short. A job a plugin confines (the
    ``confinement`` point) or one held to one GPU type (``gputypes.typing_of``) is
    placed by ``place_confined``.
    """
    tasks = sorted(
        job.pending_tasks(), key=lambda t: (session.points.task_order.key(t), t.role.index, t.index)
    )
    if not tasks:
        return True
    rule = session.points.confinement(job) if session.points.confinement else None
    typing = typing_of(session, job)
    shape = gang_shape(job, tasks) if withheld is None else None
    if shape is not None and (rule is not None or typing is not None):
        # the same gang confined otherwise (another rule, another type) may fit
        shape = (shape, None if rule is None else rule.key, None if typing is None else typing.key)
    known = session.known_failure(shape)
    if known is not None:
        session.record_reason(job, known)
        return False
    if rule is not None or typing is not None:
        reason = place_confined(
            session,
            job,
            tasks,
            rule,
            typing=typing,
            withheld=withheld,
            allow_pipeline=allow_pipeline,
        )
        if reason is None:
            return True
    else:
        with session.statement() as stmt:
            outcome = place_tasks(
                session, stmt, tasks, allow_pipeline=allow_pipeline, withheld=withheld
            )
            if settle(session, job, stmt, outcome):
                return True
        reason = gang_reason(job, outcome.allocated + outcome.pipelined, outcome.reason)
    session.record_reason(job, reason)
    session.remember_failure(shape, reason)
    return False
