"""A token's id is never given to another token: not after the newest is revoked, not
after a restart, and not on a store made before ids were kept apart (0010)."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import delete, select, text

from phalanx.control.auth import issue_token
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import TokenRow, UserRow


def issue(db: Database) -> int:
    with db.session() as session:
        user = session.scalar(select(UserRow).where(UserRow.name == "alice"))
        if user is None:
            user = UserRow(name="alice", role="user", created_at=time.time())
            session.add(user)
        return issue_token(session, user).row.id


def revoke(db: Database, token_id: int) -> None:
    """As ``DELETE /api/v1/tokens/{id}`` does: the row goes."""
    with db.session() as session:
        session.execute(delete(TokenRow).where(TokenRow.id == token_id))


def test_the_newest_tokens_id_is_not_given_again_even_after_a_restart(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path))
    assert [issue(db) for _ in range(3)] == [1, 2, 3]
    revoke(db, 3)
    assert issue(db) == 4
    revoke(db, 4)
    revoke(db, 2)
    db.close()
    db = Database.open(sqlite_url(tmp_path))  # the server starts again
    assert issue(db) == 5
    with db.session() as session:
        assert session.scalars(select(TokenRow.id).order_by(TokenRow.id)).all() == [1, 5]
    db.close()


def test_a_store_from_before_keeps_its_tokens_and_never_reuses_an_id_from_then_on(
    tmp_path: Path,
) -> None:
    db = Database.open(sqlite_url(tmp_path), migrate=False)
    db.migrate("0010")
    with db.engine.begin() as connection:
        connection.execute(
            text("INSERT INTO users (name, role, created_at) VALUES ('alice', 'user', 0)")
        )
        for n in range(3):
            connection.execute(
                text(
                    "INSERT INTO tokens (user_id, digest, label, created_at) "
                    "VALUES (1, :digest, 'old', 0)"
                ),
                {"digest": f"{n:064x}"},
            )
    db.migrate()
    with db.session() as session:
        assert session.scalars(select(TokenRow.id).order_by(TokenRow.id)).all() == [1, 2, 3]
    revoke(db, 3)
    assert issue(db) == 4
    db.close()
