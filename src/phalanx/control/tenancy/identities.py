"""The identity each user's tasks run as, looked up for the controller as it launches."""

from __future__ import annotations

import os
import pwd
import threading

from phalanx.control.store import users as stored_users
from phalanx.control.store.database import Database
from phalanx.domain.errors import InvalidInput
from phalanx.executors.identity import TaskIdentity


class Identities:
    """User name -> ``TaskIdentity``, read from the store once per user and remembered.

    A user with an account gets its home and its groups (as ``initgroups`` gives them
    at login: Slurm's way); an allocated uid gets its own gid only, and its task's
    directory as home. A user the store has no identity for (deleted, or made before
    the server ran as root and not given one yet) is ``InvalidInput``, which fails the
    task's start with that sentence: no task ever falls back to the server's identity.
    Thread-safe: the controller looks up, the API ``forget``s a deleted user.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._known: dict[str, TaskIdentity] = {}
        self._lock = threading.Lock()

    def __call__(self, user: str) -> TaskIdentity:
        """The identity ``user``'s tasks run as."""
        with self._lock:
            known = self._known.get(user)
        if known is not None:
            return known
        with self._db.session() as session:
            row = stored_users.user(session, user)
            found = None if row is None else (row.uid, row.gid, row.account)
        if found is None or found[0] is None or found[1] is None:
            raise InvalidInput(
                f"user {user!r} has no Unix identity on this server (the user was deleted, "
                "or made before the server ran tasks per user)",
                field="user",
                fix=f"create the user again (phalanx users create {user}), then resubmit",
            )
        identity = _identity(user, uid=found[0], gid=found[1], account=found[2])
        with self._lock:
            self._known[user] = identity
        return identity

    def forget(self, user: str) -> None:
        """Drop what is remembered of ``user`` (deleted: their next task must not start)."""
        with self._lock:
            self._known.pop(user, None)


def _identity(user: str, *, uid: int, gid: int, account: str | None) -> TaskIdentity:
    if account is None:
        return TaskIdentity(uid=uid, gid=gid, name=user)
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        return TaskIdentity(uid=uid, gid=gid, name=account)  # gone: the stored ids, no groups
    groups = tuple(sorted(set(os.getgrouplist(account, gid)) - {gid}))
    return TaskIdentity(uid=uid, gid=gid, name=account, groups=groups, home=entry.pw_dir)
