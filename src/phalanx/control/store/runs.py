"""Pipelines and their runs in the store: every query of ``PipelineRow`` and ``RunRow``.

A run is "active" while Pending or Running. Reads return rows or plain tuples; a run is
made or changed through the session's unit of work, committed by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import PipelineRow, RunRow
from phalanx.domain.run import RunPhase

#: The stored values of the phases a run may still leave.
ACTIVE: tuple[str, ...] = (RunPhase.PENDING.value, RunPhase.RUNNING.value)


class ChildRun(NamedTuple):
    """What a parent run reads of the child run of one of its sub-pipeline units."""

    id: str
    phase: str
    message: str
    created_at: float
    finished_at: float | None


def pipelines(session: Session) -> Sequence[PipelineRow]:
    """Every pipeline, by name."""
    return session.scalars(select(PipelineRow).order_by(PipelineRow.name)).all()


def active_ids(session: Session) -> Sequence[str]:
    """The ids of the active runs, oldest first."""
    return session.scalars(
        select(RunRow.id).where(RunRow.phase.in_(ACTIVE)).order_by(RunRow.created_at)
    ).all()


def active_scheduled(session: Session, pipeline: str) -> Sequence[str]:
    """The ids of ``pipeline``'s active runs that its schedule started."""
    return session.scalars(
        select(RunRow.id).where(
            RunRow.pipeline == pipeline,
            RunRow.scheduled_at.is_not(None),
            RunRow.phase.in_(ACTIVE),
        )
    ).all()


def request_stop(session: Session, ids: Iterable[str]) -> None:
    """Ask the workflow controller to stop the active runs ``ids``."""
    session.execute(
        update(RunRow)
        .where(RunRow.id.in_(list(ids)), RunRow.phase.in_(ACTIVE))
        .values(stop_requested=True),
        execution_options={"synchronize_session": False},
    )


def children(session: Session, ids: Iterable[str]) -> dict[str, ChildRun]:
    """The runs ``ids`` that exist, by id (see ``ChildRun``)."""
    query = select(
        RunRow.id, RunRow.phase, RunRow.message, RunRow.created_at, RunRow.finished_at
    ).where(RunRow.id.in_(list(ids)))
    return {row.id: ChildRun(*row) for row in session.execute(query)}


def lineage(session: Session, run_id: str) -> tuple[str, str | None] | None:
    """Run ``run_id``'s pipeline and parent run; None when there is no such run."""
    found = session.execute(
        select(RunRow.pipeline, RunRow.parent).where(RunRow.id == run_id)
    ).one_or_none()
    return None if found is None else (found.pipeline, found.parent)


def page(
    session: Session,
    *,
    limit: int,
    user: str | None = None,
    pipeline: str | None = None,
    phases: Sequence[str] = (),
    after: RunRow | None = None,
) -> Sequence[RunRow]:
    """Up to ``limit`` runs, oldest first by (creation time, id), after the run
    ``after`` when given; of ``user`` and ``pipeline`` alone, and in ``phases``, when
    given."""
    query = select(RunRow).order_by(RunRow.created_at, RunRow.id).limit(limit)
    if user is not None:
        query = query.where(RunRow.user == user)
    if pipeline is not None:
        query = query.where(RunRow.pipeline == pipeline)
    if phases:
        query = query.where(RunRow.phase.in_(list(phases)))
    if after is not None:
        query = query.where(
            or_(
                RunRow.created_at > after.created_at,
                and_(RunRow.created_at == after.created_at, RunRow.id > after.id),
            )
        )
    return session.scalars(query).all()


def origin(session: Session, run_id: str) -> tuple[str, str, dict[str, Any]] | None:
    """Run ``run_id``'s user, pipeline and params; None when there is no such run."""
    found = session.execute(
        select(RunRow.user, RunRow.pipeline, RunRow.params).where(RunRow.id == run_id)
    ).one_or_none()
    return None if found is None else (found.user, found.pipeline, dict(found.params))
