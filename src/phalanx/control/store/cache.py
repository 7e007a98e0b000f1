"""The step cache's entries in the store: every query of ``CacheEntryRow``.

An entry is its user's (its key includes the run's user): ``owner`` None means an
admin's view, every user's entries; a user's name narrows every query to theirs.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, select, true
from sqlalchemy.orm import Session

from phalanx.control.store.models import CacheEntryRow


def _visible(owner: str | None) -> ColumnElement[bool]:
    return true() if owner is None else CacheEntryRow.user == owner


def entry(session: Session, key: str, *, owner: str | None = None) -> CacheEntryRow | None:
    """The entry of ``key`` if ``owner`` (None: anyone) may see it."""
    row = session.get(CacheEntryRow, key)
    return row if row is not None and (owner is None or row.user == owner) else None


def entries(
    session: Session, *, owner: str | None, pipeline: str | None = None, limit: int | None = None
) -> Sequence[CacheEntryRow]:
    """The entries ``owner`` (None: anyone) may see, oldest first (of ``pipeline`` only,
    when given; at most ``limit``)."""
    query = select(CacheEntryRow).where(_visible(owner)).order_by(CacheEntryRow.created_at)
    if pipeline is not None:
        query = query.where(CacheEntryRow.pipeline == pipeline)
    return session.scalars(query.limit(limit)).all()


def put(session: Session, row: CacheEntryRow) -> None:
    """Write ``row``, replacing the entry of its key."""
    session.merge(row)


def delete(session: Session, rows: Sequence[CacheEntryRow]) -> None:
    """Remove ``rows`` and commit."""
    for row in rows:
        session.delete(row)
    session.commit()
