"""Migrations on both databases: a store of the previous schema upgrades in place."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from phalanx.control.store.database import Database, sqlite_url
from tests.integration.control import serving

_JOB = (
    'INSERT INTO jobs (id, name, queue, "user", document, phase, reason, message, phase_time,'
    " created_at, attempts, preemptions, cancel_requested, ingested, ending_message)"
    " VALUES (:id, :name, 'q', :user, '{}', 'Running', '', '', 0, 0, 0, 0, false, true, '')"
)
_TASK = (
    'INSERT INTO tasks (job_id, name, role, "index", phase, gpus)'
    " VALUES (:job, :name, :role, 0, 'Running', '[]')"
)


def test_task_names_become_unique_per_job_on_upgrade(tmp_path: Path) -> None:
    db = Database.open(
        serving.database_url(tmp_path, empty=True) or sqlite_url(tmp_path), migrate=False
    )
    db.migrate("0002")
    with db.engine.begin() as connection:
        connection.execute(text(_JOB), {"id": 1, "name": "a-b", "user": "alice"})
        connection.execute(text(_JOB), {"id": 2, "name": "a", "user": "bob"})
        connection.execute(text(_TASK), {"job": 1, "name": "a-b-c-0", "role": "c"})
    db.migrate()
    with db.engine.begin() as connection:  # job a, role b-c: the same task name, another job
        connection.execute(text(_TASK), {"job": 2, "name": "a-b-c-0", "role": "b-c"})
        names = connection.execute(text("SELECT job_id, name FROM tasks ORDER BY job_id"))
        assert names.all() == [(1, "a-b-c-0"), (2, "a-b-c-0")]
    with pytest.raises(IntegrityError), db.engine.begin() as connection:
        connection.execute(text(_TASK), {"job": 2, "name": "a-b-c-0", "role": "b-c"})
    db.close()


def test_jobs_gain_delete_requested_and_keep_their_tasks_on_upgrade(tmp_path: Path) -> None:
    db = Database.open(
        serving.database_url(tmp_path, empty=True) or sqlite_url(tmp_path), migrate=False
    )
    db.migrate("0005")
    with db.engine.begin() as connection:
        connection.execute(text(_JOB), {"id": 1, "name": "a", "user": "alice"})
        connection.execute(text(_TASK), {"job": 1, "name": "a-w-0", "role": "w"})
        connection.execute(
            text("INSERT INTO events (job_id, time, kind, message) VALUES (1, 0, 'Queued', '')")
        )
    db.migrate()
    with db.engine.begin() as connection:
        assert connection.execute(text("SELECT id, delete_requested FROM jobs")).all() == [
            (1, False)
        ]
        assert connection.execute(text("SELECT name FROM tasks")).all() == [("a-w-0",)]
        assert connection.execute(text("SELECT count(*) FROM events")).scalar() == 1
    db.close()
