"""Tenancy: which Unix identity each user's tasks run as, decided once per server.

A server runs in one of three modes (``IdentityMode``):

- **per-user** (the server runs as root): every user has a Unix identity of their own,
  stored with them: an existing account named at creation (``--account``, as Slurm
  maps users), or a uid allocated from the server's range (``--task-uids``, default
  70000-79999, like systemd's DynamicUser) with the same number as its gid. Their
  tasks run as it, with no supplementary group of the server's; they cannot read the
  data dir or other users' task directories, nor signal other users' processes. Users
  that exist without an identity (made before) are given one at start;
- **single-user** (not root): every task runs as the server's own uid, and so could
  read the data dir. The server says so at start (WARNING), and refuses to create a
  second user: one person, one identity;
- **shared** (``--shared-identity``): every user's tasks run as the server's uid, which
  the admin accepted explicitly. Said at start (WARNING); users are not isolated.
"""

from __future__ import annotations

import os

from phalanx.control.store import IntegrityError, Session
from phalanx.control.store import users as stored_users
from phalanx.control.store.database import Database
from phalanx.control.store.models import UserRow
from phalanx.control.tenancy.accounts import ACCOUNT_FIELD, IdentityRefused, allocate, map_account
from phalanx.control.tenancy.identities import Identities
from phalanx.control.tenancy.modes import (
    DEFAULT_TASK_UIDS,
    SHARED_FLAG,
    SINGLE_USER_FIX,
    UIDS_FLAG,
    IdentityMode,
    UidRange,
    announcement,
    decide,
    single_user_refusal,
)

__all__ = [
    "DEFAULT_TASK_UIDS",
    "SHARED_FLAG",
    "UIDS_FLAG",
    "Identities",
    "IdentityMode",
    "IdentityRefused",
    "Tenancy",
    "UidRange",
]

#: Attempts at an allocation that another request took at the same moment.
_ALLOCATION_ATTEMPTS = 5


class Tenancy:
    """A server's identity mode, and what follows from it for users and tasks."""

    __slots__ = ("identities", "mode", "server_uid", "uids")

    def __init__(
        self, mode: IdentityMode, db: Database, *, uids: UidRange = DEFAULT_TASK_UIDS
    ) -> None:
        self.mode = mode
        self.uids = uids
        self.server_uid = os.geteuid()
        self.identities = Identities(db)

    @classmethod
    def for_server(
        cls, db: Database, *, shared: bool, uids: UidRange, root: bool | None = None
    ) -> Tenancy:
        """The tenancy of a server that runs as root (None: whether this process does)."""
        root = os.geteuid() == 0 if root is None else root
        return cls(decide(root=root, shared=shared), db, uids=uids)

    @property
    def per_user(self) -> bool:
        """True when each user's tasks run as their own uid."""
        return self.mode is IdentityMode.PER_USER

    def describe(self) -> str:
        """One line for people: who tasks run as."""
        match self.mode:
            case IdentityMode.PER_USER:
                return f"per-user: each user's own uid (allocated from {self.uids}, or an account)"
            case IdentityMode.SINGLE_USER:
                return f"single-user: every task as uid {self.server_uid} (not root)"
            case IdentityMode.SHARED:
                return f"shared: every task as uid {self.server_uid} ({SHARED_FLAG})"

    def announcement(self, users: int) -> tuple[int, str]:
        """The level and line to log at start, for a store with ``users`` users."""
        return announcement(self.mode, server_uid=self.server_uid, users=users)

    def admit(self, session: Session, user: UserRow, account: str | None) -> None:
        """Give the new, flushed ``user`` what this mode gives (an identity, per user), or
        ``IdentityRefused``: a second user in single-user mode, an account where
        identities are not switched, an account that cannot be mapped."""
        if self.mode is IdentityMode.SINGLE_USER:
            raise IdentityRefused(
                409, single_user_refusal(self.server_uid), field="name", fix=SINGLE_USER_FIX
            )
        if account is not None and not self.per_user:
            raise IdentityRefused(
                422,
                f"this server runs every task as its own uid ({self.mode} mode), so an "
                "account would not be used",
                field=ACCOUNT_FIELD,
                fix=f"leave --account out, or run phalanx up as root without {SHARED_FLAG}",
            )
        if self.per_user:
            _give_identity(session, user, account, self.uids)

    def ensure_identities(self, db: Database) -> list[str]:
        """Give every user without an identity one (per-user mode only); their names."""
        if not self.per_user:
            return []
        with db.write() as session:
            bare = stored_users.without_identity(session)
            for user in bare:
                _give_identity(session, user, None, self.uids)
            return [user.name for user in bare]

    def count_users(self, db: Database) -> int:
        """How many users the store holds."""
        with db.session() as session:
            return stored_users.count(session)


def _give_identity(session: Session, user: UserRow, account: str | None, uids: UidRange) -> None:
    for _ in range(_ALLOCATION_ATTEMPTS):
        try:
            with session.begin_nested():
                if account is not None:
                    map_account(session, user, account)
                else:
                    allocate(session, user, uids)
                session.flush()
            return
        except IntegrityError:
            session.refresh(user)  # another request took that uid at the same moment
    raise IdentityRefused(
        409,
        "no uid could be allocated: other users were being created at the same moment",
        field="name",
        fix="retry",
    )
