"""Users' datasets in the store: every query of ``DatasetRow``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import DatasetRow, ListingRow

#: A dataset's phases: listing owed and none yet, listed, the last listing failed.
LISTING: Final = "Listing"
READY: Final = "Ready"
FAILED: Final = "Failed"


def get(session: Session, user: str, name: str) -> DatasetRow | None:
    """``user``'s dataset ``name``, or None."""
    return session.get(DatasetRow, (user, name))


def listing(session: Session, user: str | None) -> Sequence[DatasetRow]:
    """``user``'s datasets (None: everyone's), by user, then name."""
    query = select(DatasetRow).order_by(DatasetRow.user, DatasetRow.name)
    if user is not None:
        query = query.where(DatasetRow.user == user)
    return session.scalars(query).all()


def put(session: Session, user: str, name: str, document: dict[str, Any], *, now: float) -> bool:
    """Record ``user``'s dataset ``name`` with ``document``, replacing the document of
    one of that name (which is then listed again); True when it is new."""
    row = get(session, user, name)
    if row is None:
        session.add(
            DatasetRow(
                user=user,
                name=name,
                document=document,
                phase=LISTING,
                message="",
                files=0,
                size=0,
                wanted=1,
                listed=0,
                created_at=now,
                updated_at=now,
            )
        )
        return True
    if row.document != document:
        row.document, row.wanted, row.updated_at = document, row.wanted + 1, now
    return False


def relist(session: Session, user: str, name: str) -> bool:
    """Ask for ``user``'s dataset ``name`` to be listed again; False when there is none."""
    result = session.execute(
        update(DatasetRow)
        .where(DatasetRow.user == user, DatasetRow.name == name)
        .values(wanted=DatasetRow.wanted + 1)
    )
    return int(getattr(result, "rowcount", 0) or 0) > 0


def refresh_due(session: Session, now: float) -> list[tuple[str, str]]:
    """The datasets (user, name) whose ``spec.refreshEvery`` has passed since their last
    listing, and that are not owed one already."""
    query = select(DatasetRow).where(
        DatasetRow.listed >= DatasetRow.wanted, DatasetRow.listed_at.is_not(None)
    )
    due = []
    for row in session.scalars(query):
        every = row.document.get("spec", {}).get("refreshEvery")
        if isinstance(every, int | float) and (row.listed_at or 0.0) + every <= now:
            due.append((row.user, row.name))
    return due


def owed(session: Session, limit: int) -> Sequence[DatasetRow]:
    """Datasets whose listing is owed (their document changed, or a new listing was
    asked for, since the last), oldest change first."""
    query = (
        select(DatasetRow)
        .where(DatasetRow.listed < DatasetRow.wanted)
        .order_by(DatasetRow.updated_at)
        .limit(limit)
    )
    return session.scalars(query).all()


def record_listing(
    session: Session,
    user: str,
    name: str,
    *,
    asked: int,
    files: Sequence[tuple[str, int, str]],
    digest: str,
    now: float,
) -> bool:
    """Record a listing (``(path, size, version)`` per file) taken for ``asked`` (the
    ``wanted`` it was owed for), kept by its digest (``listed_files``); False when the
    dataset is gone or was changed since (that listing is owed again)."""
    size = sum(size for _, size, _ in files)
    if session.get(ListingRow, digest) is None:
        session.add(
            ListingRow(
                digest=digest,
                files=len(files),
                size=size,
                listing=[[path, size, version] for path, size, version in files],
                created_at=now,
            )
        )
    result = session.execute(
        update(DatasetRow)
        .where(DatasetRow.user == user, DatasetRow.name == name, DatasetRow.wanted == asked)
        .values(
            phase=READY,
            message="",
            files=len(files),
            size=size,
            digest=digest,
            listed=asked,
            listed_at=now,
        )
    )
    return int(getattr(result, "rowcount", 0) or 0) > 0


def record_failure(
    session: Session, user: str, name: str, *, asked: int, message: str, now: float
) -> bool:
    """Record why the listing taken for ``asked`` failed; the last good listing, if any,
    stays what jobs read. False when the dataset is gone or changed since."""
    result = session.execute(
        update(DatasetRow)
        .where(DatasetRow.user == user, DatasetRow.name == name, DatasetRow.wanted == asked)
        .values(phase=FAILED, message=message, listed=asked, listed_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0) > 0


def remove(session: Session, user: str, name: str) -> bool:
    """Forget ``user``'s dataset ``name``; False when there was none."""
    result = session.execute(
        delete(DatasetRow).where(DatasetRow.user == user, DatasetRow.name == name)
    )
    return int(getattr(result, "rowcount", 0) or 0) > 0


def remove_owned(session: Session, user: str) -> int:
    """Remove every dataset of ``user`` (they are deleted); how many there were."""
    result = session.execute(delete(DatasetRow).where(DatasetRow.user == user))
    return int(getattr(result, "rowcount", 0) or 0)


def kept_digests(session: Session) -> set[str]:
    """The listing digests some dataset names now: the copies the nodes keep."""
    query = select(DatasetRow.digest).where(DatasetRow.digest.is_not(None))
    return {digest for digest in session.scalars(query) if digest}


def listed_files(session: Session, digest: str) -> tuple[tuple[str, int, str], ...] | None:
    """The files of the listing ``digest`` (``(path, size, version)`` each, by path), or
    None when no listing of that digest is kept."""
    row = session.get(ListingRow, digest)
    if row is None:
        return None
    return tuple((str(path), int(size), str(version)) for path, size, version in row.listing)


def collect_listings(session: Session, pinned: Iterable[str]) -> int:
    """Forget the listings no dataset names now and none of the digests ``pinned`` (those
    jobs not yet ended read); how many went."""
    named = select(DatasetRow.digest).where(DatasetRow.digest.is_not(None))
    result = session.execute(
        delete(ListingRow).where(
            ListingRow.digest.not_in(named), ListingRow.digest.not_in(sorted(set(pinned)))
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)
