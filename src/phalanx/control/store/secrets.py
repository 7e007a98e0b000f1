"""Users' secrets in the store: every query of ``SecretRow``.

A row holds what may be shown (key names, size, times) in clear and the values only as
the server's ``SecretBox`` sealed them; nothing here sees a value in clear.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import SecretRow


def get(session: Session, user: str, name: str) -> SecretRow | None:
    """``user``'s secret ``name``, or None."""
    return session.get(SecretRow, (user, name))


def listing(session: Session, user: str | None) -> Sequence[SecretRow]:
    """``user``'s secrets (None: everyone's), by user, then name."""
    query = select(SecretRow).order_by(SecretRow.user, SecretRow.name)
    if user is not None:
        query = query.where(SecretRow.user == user)
    return session.scalars(query).all()


def put(
    session: Session,
    user: str,
    name: str,
    keys: Sequence[str],
    sealed: bytes,
    size: int,
    *,
    now: float,
) -> bool:
    """Record ``user``'s secret ``name`` (``keys`` stored sorted), replacing the one of
    that name; True when it is new, False when it replaced one (its ``created_at``
    kept)."""
    row = get(session, user, name)
    if row is None:
        session.add(
            SecretRow(
                user=user,
                name=name,
                keys=sorted(keys),
                sealed=sealed,
                size=size,
                created_at=now,
                updated_at=now,
            )
        )
        return True
    row.keys, row.sealed, row.size, row.updated_at = sorted(keys), sealed, size, now
    return False


def remove(session: Session, user: str, name: str) -> bool:
    """Forget ``user``'s secret ``name``; False when there was none."""
    result = session.execute(
        delete(SecretRow).where(SecretRow.user == user, SecretRow.name == name)
    )
    return int(result.rowcount) > 0  # type: ignore[attr-defined]


def remove_owned(session: Session, user: str) -> int:
    """Remove every secret of ``user`` (they are deleted); how many there were."""
    result = session.execute(delete(SecretRow).where(SecretRow.user == user))
    return int(getattr(result, "rowcount", 0) or 0)
