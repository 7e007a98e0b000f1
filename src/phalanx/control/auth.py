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
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from phalanx.control.store import Session
from phalanx.control.store import users as stored_users
from phalanx.control.store.database import Database
from phalanx.control.store.models import TokenRow, UserRow

TOKEN_PREFIX = "phx_"
ADMIN_TOKEN_FILE = "admin.token"
#: The key the agents on a Ray cluster's nodes obey (``executors.ray.agent``).
AGENT_KEY_FILE = "agent.key"


class UserRole(StrEnum):
    """What a user may do."""

    ADMIN = "admin"  # queues, nodes, users, every job
    USER = "user"  # own jobs, in queues that admit them


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who is calling, and with which token (``token_id``; None when not called with a
    stored token)."""

    name: str
    role: UserRole
    token_id: int | None = None

    @property
    def is_admin(self) -> bool:
        """True for admins."""
        return self.role is UserRole.ADMIN


@dataclass(frozen=True, slots=True, kw_only=True)
class Expired:
    """A token of ``user`` that was refused because it expired at ``at`` (epoch seconds)."""

    user: str
    at: float


#: What a presented token is: its holder, expired, or None (never issued, or revoked).
Verdict = Principal | Expired | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Issued:
    """A token just made: its stored row (digest, label, expiry) and the secret itself,
    which exists nowhere else."""

    row: TokenRow
    secret: str


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """What the store keeps of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(
    session: Session, user: UserRow, label: str = "", *, expires_at: float | None = None
) -> Issued:
    """Make a token for ``user``, valid until ``expires_at`` (None: until revoked). The
    row is flushed (it has its id); the secret is returned only here."""
    token = new_token()
    row = TokenRow(
        user=user, digest=digest(token), label=label, created_at=time.time(), expires_at=expires_at
    )
    session.add(row)
    session.flush()
    return Issued(row=row, secret=token)


def bootstrap_admin(db: Database, data_dir: Path) -> str | None:
    """On a store with no users, create ``admin`` with a token saved to ``admin.token``
    (mode 0600) and return the token; otherwise None. That token never expires."""
    with db.session() as session:
        if stored_users.any_user(session):
            return None
        admin = UserRow(name="admin", role=UserRole.ADMIN.value, created_at=time.time())
        session.add(admin)
        token = issue_token(session, admin, "bootstrap").secret
    path = data_dir / ADMIN_TOKEN_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    path.chmod(0o600)
    return token


def kept_secret(path: Path) -> str:
    """The secret in ``path`` (a file of the server's data dir, mode 0600), made there
    at its first use: 32 random bytes in hex. The same in every later run on that data
    dir, so what a server handed it to (its Ray agents) knows it again after a restart."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    secret = secrets.token_hex(32)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secret + "\n")
    return secret


class TokenCache:
    """Token digest -> principal, remembered for ``ttl`` seconds to spare the store a
    lookup per request. A token revoked through the API stops working at once (the API
    calls ``forget``); one deleted behind the server's back, within ``ttl``. A token
    past its expiry is refused from that moment, remembered or not (``clock`` is the
    wall clock its expiry is compared with)."""

    def __init__(
        self, db: Database, ttl: float = 5.0, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._ttl = ttl
        self._clock = clock
        self._known: dict[str, tuple[float, Principal, float | None]] = {}
        self._lock = threading.Lock()
        # Bumped by ``forget``: a lookup that read the store before a revocation committed
        # must not remember what it read once the revocation has cleared the cache.
        self._generation = 0

    def remembered(self, token: str) -> Verdict:
        """What ``token`` is if that is remembered and fresh; None otherwise (then ask
        ``check``). Never touches the store, so it may run on the event loop."""
        with self._lock:
            hit = self._known.get(digest(token))
        if hit is None or time.monotonic() - hit[0] >= self._ttl:
            return None
        _, found, expires_at = hit
        return self._unexpired(found, expires_at)

    def check(self, token: str) -> Verdict:
        """What ``token`` is: its holder, ``Expired``, or None for an unknown token."""
        found = self.remembered(token)
        if found is not None:
            return found
        key = digest(token)
        now = time.monotonic()
        with self._lock:
            generation = self._generation
        with self._db.session() as session:
            row = stored_users.token(session, key)
            if row is None:
                holder, expires_at = None, None
            else:
                role = UserRole(row.user.role)
                holder = Principal(name=row.user.name, role=role, token_id=row.id)
                expires_at = row.expires_at
        with self._lock:
            # A revocation in between (``forget``): what was read may be stale; not kept.
            if holder is None or generation != self._generation:
                self._known.pop(key, None)
            else:
                if len(self._known) > 10_000:
                    self._known.clear()
                self._known[key] = (now, holder, expires_at)
        return None if holder is None else self._unexpired(holder, expires_at)

    def forget(self) -> None:
        """Drop every remembered token (after a revocation)."""
        with self._lock:
            self._known.clear()
            self._generation += 1

    def _unexpired(self, holder: Principal, expires_at: float | None) -> Verdict:
        if expires_at is not None and self._clock() >= expires_at:
            return Expired(user=holder.name, at=expires_at)
        return holder
