"""The migrations build exactly the schema the models describe, and upgrade old stores."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import select, text

from phalanx.control.auth import Principal, TokenCache, digest, new_token
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import Base, JobRow, TaskUidRow, TokenRow, UserRow


def test_the_migrated_schema_is_the_models_schema(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path))
    with db.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    db.close()
    assert differences == []


def test_a_store_made_before_jobs_kept_their_ending_upgrades_in_place(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path), migrate=False)
    db.migrate("0001")
    with db.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (name, queue, user, document, phase, reason, message, "
                "phase_time, created_at, attempts, preemptions, cancel_requested, ingested) "
                "VALUES ('old', 'q', 'u', '{}', 'Running', '', '', 0, 0, 1, 0, 0, 1)"
            )
        )
    db.migrate()
    with db.session() as session:
        row = session.query(JobRow).one()
        assert (row.name, row.attempts, row.ending, row.ending_message) == ("old", 1, None, "")
    db.close()


def test_tokens_made_before_expiries_existed_stay_valid(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path), migrate=False)
    db.migrate("0002")
    token = new_token()  # the admin.token of a first start, as 0002 stored it
    with db.engine.begin() as connection:
        connection.execute(
            text("INSERT INTO users (name, role, created_at) VALUES ('admin', 'admin', 0)")
        )
        connection.execute(
            text(
                "INSERT INTO tokens (user_id, digest, label, created_at) "
                "VALUES (1, :digest, 'bootstrap', 0)"
            ),
            {"digest": digest(token)},
        )
    db.migrate()
    with db.session() as session:
        assert session.scalars(select(TokenRow.expires_at)).all() == [None]
    found = TokenCache(db).check(token)
    assert isinstance(found, Principal) and found.name == "admin" and found.is_admin


def test_a_store_made_before_users_had_identities_upgrades_in_place(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path), migrate=False)
    db.migrate("0002")
    with db.engine.begin() as connection:
        connection.execute(
            text("INSERT INTO users (name, role, created_at) VALUES ('old', 'user', 0)")
        )
    db.migrate()
    with db.session() as session:
        row = session.query(UserRow).one()
        assert (row.name, row.uid, row.gid, row.account) == ("old", None, None, None)
        session.add(TaskUidRow(uid=70000, user="old", created_at=0.0))
    db.close()
