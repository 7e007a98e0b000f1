"""Tenancy without a server: modes, uid ranges, allocation, account mapping, lookups.

The host's account database is stood in for where a test needs accounts it cannot make
(``pwd``/``grp``/``os.getgrouplist`` as the accounts module sees them).
"""

from __future__ import annotations

import logging
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import TaskUidRow, UserRow
from phalanx.control.tenancy import IdentityMode, IdentityRefused, Tenancy, UidRange, accounts
from phalanx.control.tenancy.modes import DEFAULT_TASK_UIDS, announcement, decide
from phalanx.domain.errors import InvalidInput
from phalanx.executors.identity import TaskIdentity

UIDS = UidRange(first=71000, last=71002)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(sqlite_url(tmp_path))
    yield database
    database.close()


@pytest.fixture(autouse=True)
def host(monkeypatch: pytest.MonkeyPatch) -> dict[str, pwd.struct_passwd]:
    """A host whose accounts are these (and whose ids in UIDS are all free)."""
    entries = {
        "svc": pwd.struct_passwd(("svc", "x", 1500, 1500, "", "/home/svc", "/bin/sh")),
        "rooty": pwd.struct_passwd(("rooty", "x", 0, 0, "", "/root", "/bin/sh")),
        "wheel": pwd.struct_passwd(("wheel", "x", 1600, 1600, "", "/home/wheel", "/bin/sh")),
    }

    def getpwnam(name: str) -> pwd.struct_passwd:
        return entries[name]

    groups = {"svc": [1500, 1700], "rooty": [0], "wheel": [1600, 0]}
    monkeypatch.setattr(accounts.pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(accounts.os, "getgrouplist", lambda name, gid: groups[name])
    monkeypatch.setattr(accounts, "id_on_host", lambda uid: False)
    return entries


def new_user(tenancy: Tenancy, db: Database, name: str, account: str | None = None) -> UserRow:
    with db.session() as session:
        user = UserRow(name=name, role="user", created_at=0.0)
        session.add(user)
        session.flush()
        tenancy.admit(session, user, account)
        return user


def per_user(db: Database) -> Tenancy:
    return Tenancy(IdentityMode.PER_USER, db, uids=UIDS)


def test_the_mode_follows_root_and_the_flag() -> None:
    assert decide(root=True, shared=False) is IdentityMode.PER_USER
    assert decide(root=False, shared=False) is IdentityMode.SINGLE_USER
    assert decide(root=False, shared=True) is IdentityMode.SHARED
    assert decide(root=True, shared=True) is IdentityMode.SHARED


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("70000", "'70000' is not FIRST-LAST"),
        ("a-b", "'a-b' is not FIRST-LAST"),
        ("0-10", "0-10 is not a range of regular uids"),
        ("5000-4000", "5000-4000 is not a range of regular uids"),
    ],
)
def test_a_bad_uid_range_names_the_option(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as error:
        UidRange.parse(text)
    assert error.value.field == "--task-uids"


def test_the_default_range_keeps_clear_of_system_and_namespace_ids() -> None:
    assert str(DEFAULT_TASK_UIDS) == "70000-79999" and len(DEFAULT_TASK_UIDS) == 10_000
    assert UidRange.parse(" 70000-70001 ") == UidRange(first=70000, last=70001)


def test_uids_are_allocated_lowest_first_skipping_the_hosts_and_never_twice(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenancy = per_user(db)
    monkeypatch.setattr(accounts, "id_on_host", lambda uid: uid == 71000)  # an account has it
    alice = new_user(tenancy, db, "alice")
    assert (alice.uid, alice.gid, alice.account) == (71001, 71001, None)
    with db.session() as session:
        session.delete(session.scalars(select(UserRow).where(UserRow.name == "alice")).one())
    again = new_user(tenancy, db, "alice")
    assert again.uid == 71002  # 71001 stays alice-that-was's, in the ledger
    with db.session() as session:
        ledger = [(r.uid, r.user) for r in session.scalars(select(TaskUidRow))]
    assert ledger == [(71001, "alice"), (71002, "alice")]
    with pytest.raises(IdentityRefused, match="every uid of 71000-71002") as error:
        new_user(tenancy, db, "bob")
    assert (error.value.status, error.value.field) == (409, "name")


def test_an_account_is_mapped_with_its_ids(db: Database) -> None:
    svc = new_user(per_user(db), db, "sam", "svc")
    assert (svc.uid, svc.gid, svc.account) == (1500, 1500, "svc")


@pytest.mark.parametrize(
    ("account", "status", "words"),
    [
        ("nobody-here", 422, "no account named 'nobody-here'"),
        ("rooty", 422, "is root or in root's group"),
        ("wheel", 422, "is root or in root's group"),  # uid 1600, but a member of group 0
    ],
)
def test_an_account_that_is_missing_or_roots_is_refused(
    db: Database, account: str, status: int, words: str
) -> None:
    with pytest.raises(IdentityRefused, match=words) as error:
        new_user(per_user(db), db, "x", account)
    assert (error.value.status, error.value.field) == (status, "account")


def test_an_account_is_one_users_only(db: Database) -> None:
    tenancy = per_user(db)
    new_user(tenancy, db, "sam", "svc")
    with pytest.raises(IdentityRefused, match="already the identity of another user") as error:
        new_user(tenancy, db, "samantha", "svc")
    assert error.value.status == 409


def test_single_user_mode_admits_nobody_and_shared_mode_no_account(db: Database) -> None:
    single = Tenancy(IdentityMode.SINGLE_USER, db)
    with pytest.raises(IdentityRefused, match="single-user mode") as error:
        new_user(single, db, "bob")
    assert "--shared-identity" in (error.value.fix or "")
    shared = Tenancy(IdentityMode.SHARED, db)
    assert new_user(shared, db, "bob").uid is None
    with pytest.raises(IdentityRefused, match="would not be used"):
        new_user(shared, db, "carl", "svc")


def test_users_made_before_get_an_identity_at_a_per_user_start(db: Database) -> None:
    with db.session() as session:
        session.add_all([UserRow(name=n, role="user", created_at=0.0) for n in ("a", "b")])
    assert Tenancy(IdentityMode.SHARED, db).ensure_identities(db) == []
    assert per_user(db).ensure_identities(db) == ["a", "b"]
    with db.session() as session:
        assert [u.uid for u in session.scalars(select(UserRow).order_by(UserRow.name))] == [
            71000,
            71001,
        ]
    assert per_user(db).ensure_identities(db) == []


def test_lookups_give_tasks_the_users_identity_and_refuse_a_user_without(
    db: Database, host: dict[str, pwd.struct_passwd], monkeypatch: pytest.MonkeyPatch
) -> None:
    tenancy = per_user(db)
    new_user(tenancy, db, "alice")
    new_user(tenancy, db, "sam", "svc")
    from phalanx.control.tenancy import identities

    monkeypatch.setattr(identities.pwd, "getpwnam", lambda name: host[name])
    monkeypatch.setattr(identities.os, "getgrouplist", lambda name, gid: [1500, 1700])
    assert tenancy.identities("alice") == TaskIdentity(uid=71000, gid=71000, name="alice")
    assert tenancy.identities("sam") == TaskIdentity(
        uid=1500, gid=1500, name="svc", groups=(1700,), home="/home/svc"
    )
    with pytest.raises(InvalidInput, match="user 'ghost' has no Unix identity") as error:
        tenancy.identities("ghost")
    assert "phalanx users create ghost" in str(error.value)
    with db.session() as session:
        session.delete(session.scalars(select(UserRow).where(UserRow.name == "alice")).one())
    tenancy.identities.forget("alice")
    with pytest.raises(InvalidInput, match="user 'alice' has no Unix identity"):
        tenancy.identities("alice")


def test_what_is_said_at_start() -> None:
    level, line = announcement(IdentityMode.SINGLE_USER, server_uid=1000, users=2)
    assert level == logging.WARNING
    assert line.startswith("single-user mode: phalanx runs as uid 1000, not root")
    assert "Fix: run phalanx up as root" in line and line.endswith(
        "(2 users exist already and share it)"
    )
    level, line = announcement(IdentityMode.SHARED, server_uid=0, users=1)
    assert level == logging.WARNING and "every user's tasks run as uid 0" in line
    level, _ = announcement(IdentityMode.PER_USER, server_uid=0, users=1)
    assert level == logging.INFO
