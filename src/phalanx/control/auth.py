"""Users and bearer tokens.

A token is shown once, when it is made; the store keeps only its SHA-256 digest, so a
copy of the database grants nothing. Roles: ``admin`` (everything) and ``user`` (own
jobs, and queues whose ACL lets them submit).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from phalanx.control.store.database import Database
from phalanx.control.store.models import TokenRow, UserRow

TOKEN_PREFIX = "phx_"
ADMIN_TOKEN_FILE = "admin.token"


class UserRole(StrEnum):
    """What a user may do."""

    ADMIN = "admin"  # queues, nodes, users, every job
    USER = "user"  # own jobs, in queues that admit them


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who is calling."""

    name: str
    role: UserRole

    @property
    def is_admin(self) -> bool:
        """True for admins."""
        return self.role is UserRole.ADMIN


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """What the store keeps of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(session: Session, user: UserRow, label: str = "") -> str:
    """Make a token for ``user``; returns it (the only time it is seen)."""
    token = new_token()
    session.add(TokenRow(user=user, digest=digest(token), label=label, created_at=time.time()))
    return token


def bootstrap_admin(db: Database, data_dir: Path) -> str | None:
    """On a store with no users, create ``admin`` with a token saved to ``admin.token``
    (mode 0600) and return the token; otherwise None."""
    with db.session() as session:
        if session.scalar(select(UserRow.id).limit(1)) is not None:
            return None
        admin = UserRow(name="admin", role=UserRole.ADMIN.value, created_at=time.time())
        session.add(admin)
        token = issue_token(session, admin, "bootstrap")
    path = data_dir / ADMIN_TOKEN_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    path.chmod(0o600)
    return token


class TokenCache:
    """Token digest -> principal, remembered for ``ttl`` seconds to spare the store a
    lookup per request; a revoked token stops working within ``ttl``."""

    def __init__(self, db: Database, ttl: float = 5.0) -> None:
        self._db = db
        self._ttl = ttl
        self._known: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def remembered(self, token: str) -> Principal | None:
        """Who holds ``token`` if that is remembered and fresh; None otherwise (then ask
        ``principal``). Never touches the store, so it may run on the event loop."""
        with self._lock:
            hit = self._known.get(digest(token))
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        return None

    def principal(self, token: str) -> Principal | None:
        """Who holds ``token``, or None for an unknown token."""
        found = self.remembered(token)
        if found is not None:
            return found
        key = digest(token)
        now = time.monotonic()
        with self._db.session() as session:
            row = session.scalar(select(TokenRow).where(TokenRow.digest == key))
            found = (
                None if row is None else Principal(name=row.user.name, role=UserRole(row.user.role))
            )
        with self._lock:
            if found is None:
                self._known.pop(key, None)
            else:
                if len(self._known) > 10_000:
                    self._known.clear()
                self._known[key] = (now, found)
        return found

    def forget(self) -> None:
        """Drop every remembered token (after a revocation)."""
        with self._lock:
            self._known.clear()
