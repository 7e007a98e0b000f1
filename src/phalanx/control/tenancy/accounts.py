"""A new user's Unix identity: an existing account named for them, or an allocated uid.

Guarantees:

- a mapped account exists on this host, is not root (uid 0), and neither its primary
  group nor any of its groups is root's (gid 0); it is refused otherwise, naming it;
- no two users have the same uid (the store refuses it too);
- an allocated uid comes from the server's range, has no account and no group on this
  host (its gid is the same number), and was never allocated before: every allocation
  is kept in ``task_uids`` after its user is gone. The lowest such uid is taken, so the
  choice is the same for the same store and host.
"""

from __future__ import annotations

import grp
import os
import pwd
import time

from phalanx.control.store import Session
from phalanx.control.store import users as stored_users
from phalanx.control.store.models import TaskUidRow, UserRow
from phalanx.control.tenancy.modes import UIDS_FLAG, UidRange
from phalanx.domain.errors import InvalidInput

#: How ``phalanx users create`` names an account.
ACCOUNT_FIELD = "account"


class IdentityRefused(InvalidInput):
    """A user whose identity cannot be given, with the HTTP status that says why
    (409: a conflict with what exists, 422: a bad value)."""

    def __init__(self, status: int, message: str, *, field: str, fix: str) -> None:
        super().__init__(message, field=field, fix=fix)
        self.status = status
        self.detail = message


def map_account(session: Session, user: UserRow, account: str) -> None:
    """Give ``user`` the identity of the existing ``account``; ``IdentityRefused`` when
    it does not exist, is root's, or is another user's already."""
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        raise IdentityRefused(
            422,
            f"no account named {account!r} exists on the server's host",
            field=ACCOUNT_FIELD,
            fix="create the account first (useradd), or leave the account out for an allocated uid",
        ) from None
    groups = os.getgrouplist(account, entry.pw_gid)
    if entry.pw_uid == 0 or 0 in groups:
        raise IdentityRefused(
            422,
            f"account {account!r} is root or in root's group: its tasks could read and "
            "change anything on the host",
            field=ACCOUNT_FIELD,
            fix="name an account that is not root and not in group 0",
        )
    holder = stored_users.holder_of_uid(session, entry.pw_uid)
    if holder is not None:
        raise IdentityRefused(
            409,
            f"account {account!r} (uid {entry.pw_uid}) is already the identity of another user",
            field=ACCOUNT_FIELD,
            fix="give each user an account of their own",
        )
    user.uid, user.gid, user.account = entry.pw_uid, entry.pw_gid, account


def allocate(session: Session, user: UserRow, uids: UidRange) -> None:
    """Give ``user`` the lowest uid of ``uids`` never allocated and unknown to the host,
    with the same gid; ``IdentityRefused`` (409) when none is left."""
    taken = stored_users.uids_taken(session, uids.first)
    for uid in range(uids.first, uids.last + 1):
        if uid in taken or id_on_host(uid):
            continue
        session.add(TaskUidRow(uid=uid, user=user.name, created_at=time.time()))
        user.uid, user.gid, user.account = uid, uid, None
        return
    raise IdentityRefused(
        409,
        f"every uid of {uids} has been allocated or belongs to an account on the host",
        field="name",
        fix=f"restart the server with a wider {UIDS_FLAG} range, or map an existing "
        "account (phalanx users create NAME --account ACCOUNT)",
    )


def id_on_host(uid: int) -> bool:
    """True when an account or a group on this host has this number (an allocated uid
    never has one)."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return False
