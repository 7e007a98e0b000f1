"""``/api/v1/cache``: the step cache's entries, listed, shown and evicted.

Every user reads the entries (as every user reads pipelines); an entry is evicted by an
admin or by the owner of its pipeline. The workflow controller alone writes entries.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from phalanx.control.api.deps import ApiError, Caller, DbSession, errors
from phalanx.control.auth import Principal
from phalanx.control.schemas.views import CacheEntryView
from phalanx.control.store.models import CacheEntryRow, PipelineRow

router = APIRouter(prefix="/api/v1/cache", tags=["cache"], responses=errors(401, 422))


@router.get("", response_model=list[CacheEntryView])
def list_entries(
    _: Caller,
    session: DbSession,
    pipeline: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
) -> list[CacheEntryView]:
    """Entries, oldest first (of one pipeline with ``pipeline``)."""
    query = select(CacheEntryRow).order_by(CacheEntryRow.created_at).limit(limit)
    if pipeline is not None:
        query = query.where(CacheEntryRow.pipeline == pipeline)
    return [view(row) for row in session.scalars(query)]


@router.get("/{key}", response_model=CacheEntryView, responses=errors(404))
def get_entry(key: str, _: Caller, session: DbSession) -> CacheEntryView:
    """One entry, with the canonical document its key hashes."""
    return view(_existing(session, key))


@router.delete("/{key}", response_model=list[CacheEntryView], responses=errors(403, 404))
def evict_entry(key: str, caller: Caller, session: DbSession) -> list[CacheEntryView]:
    """Evict one entry (its artifacts stay in their run's workspace): the next run of its
    step runs it again."""
    row = _existing(session, key)
    _may_evict(session, row.pipeline, caller)
    evicted = [view(row)]
    session.delete(row)
    session.commit()
    return evicted


@router.delete("", response_model=list[CacheEntryView], responses=errors(403))
def evict_pipeline(
    caller: Caller, session: DbSession, pipeline: Annotated[str, Query(min_length=1)]
) -> list[CacheEntryView]:
    """Evict every entry of ``pipeline``; the answer lists them."""
    _may_evict(session, pipeline, caller)
    rows = session.scalars(select(CacheEntryRow).where(CacheEntryRow.pipeline == pipeline)).all()
    evicted = [view(row) for row in rows]
    for row in rows:
        session.delete(row)
    session.commit()
    return evicted


def view(row: CacheEntryRow) -> CacheEntryView:
    """The API's view of ``row``."""
    return CacheEntryView(
        key=row.key,
        pipeline=row.pipeline,
        step=row.step,
        unit=row.unit,
        run_id=row.run_id,
        user=row.user,
        created_at=row.created_at,
        expires_at=row.expires_at,
        outputs=row.outputs,
        artifacts=row.artifacts,
        material=row.material,
    )


def _existing(session: DbSession, key: str) -> CacheEntryRow:
    row = session.get(CacheEntryRow, key)
    if row is None:
        raise ApiError(
            404,
            f"no cache entry {key[:64]!r}",
            field="key",
            fix="list the entries: phalanx cache list",
        )
    return row


def _may_evict(session: DbSession, pipeline: str, caller: Principal) -> None:
    owner = session.scalar(select(PipelineRow.user).where(PipelineRow.name == pipeline))
    if not caller.is_admin and owner != caller.name:
        raise ApiError(
            403,
            f"the cache of pipeline {pipeline[:253]} is its owner's to evict",
            fix="ask the pipeline's owner or an admin",
        )
