"""Opening the database: SQLite (WAL) by default, PostgreSQL by URL; schema via Alembic.

``Database.open`` brings the schema to the newest migration before anything reads it,
so a data dir written by an older phalanx is upgraded in place and a new one is created.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker

from phalanx.domain.errors import InvalidInput

MIGRATIONS = Path(__file__).with_name("migrations")


def ping(session: Session) -> None:
    """Ask the database the smallest question; raises when it does not answer."""
    session.execute(text("SELECT 1"))


def sqlite_url(data_dir: Path) -> str:
    """The URL of the default database inside ``data_dir``."""
    return f"sqlite:///{data_dir / 'phalanx.db'}"


class Database:
    """An engine plus a session factory. Sessions never expire objects on commit."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        # SQLite allows one writer; its busy handler makes waiting writers sleep in steps of
        # milliseconds. Queueing this process's writers on a lock instead is much faster.
        self._write_lock: threading.Lock | None = (
            threading.Lock() if engine.dialect.name == "sqlite" else None
        )

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Database:
        """Connect to ``url`` and upgrade its schema to the newest migration."""
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise InvalidInput(
                f"{url!r} is not a database URL",
                field="db",
                fix="use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB",
            ) from None
        options: dict[str, Any] = {}
        if parsed.get_backend_name() == "sqlite":
            # Threads share the engine: the API's worker threads and the controller.
            options["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if parsed.database not in (None, "", ":memory:"):
                # Enough pooled connections for every API worker thread (anyio's 40), the
                # controller and the submission writer: an overflow connection would be
                # opened and closed per request, paying the pragmas each time.
                options["pool_size"] = 48
                options["max_overflow"] = 16
        else:
            if parsed.drivername == "postgresql":
                parsed = parsed.set(drivername="postgresql+psycopg")
            options["pool_pre_ping"] = True
            options["pool_size"] = 16  # kept open: API worker threads, controller, writer
            options["max_overflow"] = 32
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            private_sqlite_files(Path(parsed.database))
        engine = create_engine(parsed, **options)
        if parsed.get_backend_name() == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        database = cls(engine)
        if migrate:
            database.migrate()
        return database

    def migrate(self, revision: str = "head") -> None:
        """Apply every Alembic migration not yet applied, up to ``revision``."""
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)

    def up_to_date(self) -> bool:
        """True when every migration has been applied (what a process that must not
        change the schema checks before it reads)."""
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        heads = set(ScriptDirectory.from_config(config).get_heads())
        with self.engine.connect() as connection:
            return set(MigrationContext.configure(connection).get_current_heads()) == heads

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits when the block ends normally and rolls back otherwise."""
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """Like ``session``, for a transaction that writes: writers of this process take
        turns (on SQLite; PostgreSQL lets them run together)."""
        if self._write_lock is None:
            with self.session() as session:
                yield session
            return
        with self._write_lock, self.session() as session:
            yield session

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()


#: What SQLite keeps beside a database file (it gives them the database file's mode).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_sqlite_files(path: Path) -> None:
    """Make the SQLite database at ``path`` and the files SQLite keeps beside it mode
    0600: a new database file is created so before SQLite opens it, and SQLite makes its
    ``-wal`` and ``-shm`` with the database file's mode (they hold recent writes: tokens'
    hashes, users' environments). An existing one is tightened."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    for suffix in ("", *SQLITE_SIDE_FILES):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600, follow_symlinks=False)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    # WAL lets readers (the API) proceed while the controller writes; NORMAL still
    # survives a crash of the process (not of the machine) without losing commits.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
