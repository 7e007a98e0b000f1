"""Tokens as the server checks them: expiry by the clock, revocation through the cache."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import delete, select

from phalanx.control.auth import Expired, Principal, TokenCache, UserRole, issue_token
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import TokenRow, UserRow


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def stored_token(db: Database, *, expires_at: float | None = None) -> tuple[int, str]:
    with db.session() as session:
        user = UserRow(name="alice", role="user", created_at=time.time())
        session.add(user)
        issued = issue_token(session, user, "laptop", expires_at=expires_at)
        return issued.row.id, issued.secret


def test_a_remembered_token_is_refused_from_its_expiry_on(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path))
    clock = Clock()
    token_id, token = stored_token(db, expires_at=clock.now + 60)
    tokens = TokenCache(db, ttl=3600, clock=clock)
    assert tokens.check(token) == Principal(name="alice", role=UserRole.USER, token_id=token_id)
    clock.now += 59.9
    assert isinstance(tokens.remembered(token), Principal)
    clock.now += 0.1
    assert tokens.remembered(token) == Expired(user="alice", at=clock.now)
    assert tokens.check(token) == Expired(user="alice", at=clock.now)
    db.close()


def test_a_token_revoked_through_the_cache_is_unknown_at_once(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path))
    token_id, token = stored_token(db)
    tokens = TokenCache(db, ttl=3600)
    assert isinstance(tokens.check(token), Principal)
    with db.session() as session:
        session.execute(delete(TokenRow).where(TokenRow.id == token_id))
        assert session.scalars(select(TokenRow)).all() == []
    tokens.forget()  # what the API does after it revokes
    assert tokens.remembered(token) is None
    assert tokens.check(token) is None
    db.close()
