"""Rollouts in the store: every query of ``RolloutRow``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import RolloutRow

#: The phase of a rollout under way.
PROGRESSING: Final = "Progressing"


def add(session: Session, **fields: Any) -> RolloutRow:
    """Record a new rollout (its columns as keywords); the row, flushed (its id set)."""
    row = RolloutRow(**fields)
    session.add(row)
    session.flush()
    return row


def progressing(session: Session, service: str | None = None) -> list[RolloutRow]:
    """The rollouts under way (of ``service``; None: of every service), oldest first."""
    query = select(RolloutRow).where(RolloutRow.phase == PROGRESSING).order_by(RolloutRow.id)
    if service is not None:
        query = query.where(RolloutRow.service == service)
    return list(session.scalars(query).all())


def of_services(session: Session, services: Iterable[str]) -> list[RolloutRow]:
    """The rollouts of ``services``, newest first."""
    query = (
        select(RolloutRow)
        .where(RolloutRow.service.in_(list(services)))
        .order_by(RolloutRow.id.desc())
    )
    return list(session.scalars(query).all())


def ask_abort(session: Session, row_id: int, user: str) -> None:
    """Mark rollout ``row_id`` to be rolled back, as ``user`` asked."""
    session.execute(update(RolloutRow).where(RolloutRow.id == row_id).values(abort_by=user))


def remove_for(session: Session, service: str) -> None:
    """Forget ``service``'s rollouts (it was deleted)."""
    session.execute(delete(RolloutRow).where(RolloutRow.service == service))
