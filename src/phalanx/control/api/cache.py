"""``/api/v1/cache``: the step cache's entries, listed, shown and evicted.

An entry is its user's: the key of a step includes the run's user, so only that user's
runs make, replace or are served it. A user lists, shows and evicts their own entries
(another user's entry is not found); an admin, every entry. The workflow controller
alone writes entries.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from phalanx.control.api.deps import Caller, DbSession, errors
from phalanx.control.auth import Principal
from phalanx.control.errors import ApiError
from phalanx.control.store import cache
from phalanx.control.store.models import CacheEntryRow
from phalanx.wire.views import CacheEntryView

router = APIRouter(prefix="/api/v1/cache", tags=["cache"], responses=errors(401, 422))


@router.get("", response_model=list[CacheEntryView])
def list_entries(
    caller: Caller,
    session: DbSession,
    pipeline: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
) -> list[CacheEntryView]:
    """The caller's entries (an admin's: everyone's), oldest first (of one pipeline with
    ``pipeline``)."""
    rows = cache.entries(session, owner=_owner(caller), pipeline=pipeline, limit=limit)
    return [view(row) for row in rows]


@router.get("/{key}", response_model=CacheEntryView, responses=errors(404))
def get_entry(key: str, caller: Caller, session: DbSession) -> CacheEntryView:
    """One entry of the caller's, with the canonical document its key hashes."""
    return view(_existing(session, key, caller))


@router.delete("/{key}", response_model=list[CacheEntryView], responses=errors(404))
def evict_entry(key: str, caller: Caller, session: DbSession) -> list[CacheEntryView]:
    """Evict one entry of the caller's (its artifacts stay in their run's workspace): the
    next run of its step runs it again."""
    row = _existing(session, key, caller)
    evicted = [view(row)]
    cache.delete(session, [row])
    return evicted


@router.delete("", response_model=list[CacheEntryView])
def evict_pipeline(
    caller: Caller, session: DbSession, pipeline: Annotated[str, Query(min_length=1)]
) -> list[CacheEntryView]:
    """Evict every entry of ``pipeline`` the caller may see (an admin: everyone's); the
    answer lists them."""
    rows = cache.entries(session, owner=_owner(caller), pipeline=pipeline)
    evicted = [view(row) for row in rows]
    cache.delete(session, rows)
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


def _owner(caller: Principal) -> str | None:
    """Whose entries ``caller`` sees: their own, or everyone's (None) for an admin."""
    return None if caller.is_admin else caller.name


def _existing(session: DbSession, key: str, caller: Principal) -> CacheEntryRow:
    """The entry ``key`` if the caller may see it; another user's is not found."""
    row = cache.entry(session, key, owner=_owner(caller))
    if row is None:
        raise ApiError(
            404,
            f"no cache entry {key[:64]!r}",
            field="key",
            fix="list the entries: phalanx cache list",
        )
    return row
