"""A page of jobs is answered from grouped task counts: a job's size does not change
what the listing reads. Rows are counted where the database hands them over (the DBAPI
cursor), not timed."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import create_engine, event, insert

from phalanx.control.app import create_app
from phalanx.control.auth import bootstrap_admin
from phalanx.control.metrics import Metrics
from phalanx.control.store.database import Database
from phalanx.control.store.models import JobRow, TaskRow
from phalanx.spec.loader import build_document
from tests.unit.control.plane import Clock, FakeExecutor, controller_on

HUGE = 100_000


@dataclass
class Reads:
    """Rows the database returned and statements it ran, since the last ``reset``."""

    rows: int = 0
    statements: int = 0

    def reset(self) -> None:
        self.rows = self.statements = 0


class _Cursor:
    """A DBAPI cursor that counts the rows it hands over."""

    def __init__(self, cursor: sqlite3.Cursor, reads: Reads) -> None:
        self._cursor = cursor
        self._reads = reads

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._reads.rows += row is not None
        return row

    def fetchmany(self, *size: int) -> list[Any]:
        rows = self._cursor.fetchmany(*size)
        self._reads.rows += len(rows)
        return rows

    def fetchall(self) -> list[Any]:
        rows = self._cursor.fetchall()
        self._reads.rows += len(rows)
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Connection:
    """A sqlite3 connection whose cursors count the rows they hand over."""

    def __init__(self, connection: sqlite3.Connection, reads: Reads) -> None:
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_reads", reads)

    def cursor(self, *args: Any) -> _Cursor:
        return _Cursor(self._connection.cursor(*args), self._reads)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._connection, name, value)


class Http:
    """Requests to the app in this process, as the admin (no socket, no server thread)."""

    def __init__(self, app: FastAPI, token: str) -> None:
        self._app = app
        self._headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self._app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://phalanx", headers=self._headers
            ) as client:
                return await client.get(path, params=params)

        return asyncio.run(call())


@dataclass
class Served:
    http: Http
    reads: Reads
    db: Database


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    reads = Reads()
    path = tmp_path / "phalanx.db"
    engine = create_engine(
        "sqlite://",
        creator=lambda: _Connection(sqlite3.connect(path, check_same_thread=False), reads),
    )
    event.listen(engine, "before_cursor_execute", lambda *_: _count_statement(reads))
    db = Database(engine)
    db.migrate()
    token = bootstrap_admin(db, tmp_path)
    app = create_app(db, controller_on(db, FakeExecutor(), Clock()), Metrics())
    assert token is not None
    yield Served(Http(app, token), reads, db)
    app.state.submissions.close()
    db.close()


def _count_statement(reads: Reads) -> None:
    reads.statements += 1


def store_job(db: Database, name: str, replicas: int, *, running: int = 0) -> None:
    """A stored job of one role with ``replicas`` tasks, the first ``running`` of them
    Running on node n0 with one GPU each (written as rows: no scheduler involved)."""
    role = {"name": "w", "replicas": 1, "resources": {"cpu": 1, "gpu": 1}, "command": "true"}
    raw = {"apiVersion": "phalanx/v1", "kind": "Job", "metadata": {"name": name}}
    built = build_document({**raw, "spec": {"queue": "q", "user": "admin", "roles": [role]}})
    document = built.model_dump(mode="json", by_alias=True, exclude_none=True)
    document["spec"]["roles"][0]["replicas"] = replicas  # stored as is: no bound applies
    now = time.time()
    with db.write() as session:
        job_id = session.execute(
            insert(JobRow).returning(JobRow.id),
            {
                "name": name,
                "queue": "q",
                "user": "admin",
                "document": document,
                "phase": "Running" if running else "Pending",
                "phase_time": now,
                "created_at": now,
            },
        ).scalar_one()
        session.execute(
            insert(TaskRow),
            [
                {
                    "job_id": job_id,
                    "name": f"{name}-w-{i}",
                    "role": "w",
                    "index": i,
                    "phase": "Running" if i < running else "Pending",
                    "node": "n0" if i < running else None,
                    "gpus": [i % 4] if i < running else [],
                }
                for i in range(replicas)
            ],
        )


def test_a_page_with_a_huge_job_reads_counts_not_tasks(served: Served) -> None:
    store_job(served.db, "small-a", 2, running=1)
    store_job(served.db, "huge", HUGE, running=3)
    store_job(served.db, "small-b", 1)
    served.http.get("/api/v1/users/me")  # the admin's token is remembered from here on
    served.reads.reset()

    answer = served.http.get("/api/v1/jobs", params={"limit": 10})

    assert answer.status_code == 200, answer.text
    assert served.reads.rows < 50, f"the listing read {served.reads.rows} rows"
    assert served.reads.statements <= 5
    items = {job["name"]: job for job in answer.json()["items"]}
    assert list(items) == ["small-a", "huge", "small-b"]
    huge = items["huge"]
    assert "tasks" not in huge
    assert huge["task_counts"] == {"Pending": HUGE - 3, "Running": 3}
    assert huge["allocated"] == {"cpu": 3000.0, "gpu": 3.0}
    assert huge["nodes"] == ["n0"]
    assert huge["requests"]["gpu"] == HUGE
    assert items["small-b"]["task_counts"] == {"Pending": 1}
    assert items["small-b"]["allocated"] == {} and items["small-b"]["nodes"] == []


def test_a_huge_jobs_own_view_carries_its_first_tasks_and_the_rest_page(served: Served) -> None:
    store_job(served.db, "huge", HUGE)
    served.http.get("/api/v1/users/me")
    served.reads.reset()

    job = served.http.get("/api/v1/jobs/huge").json()

    assert served.reads.rows < 1100, f"the job's view read {served.reads.rows} rows"
    assert [t["name"] for t in job["tasks"][:2]] == ["huge-w-0", "huge-w-1"]
    assert len(job["tasks"]) == 1000 and job["tasks_omitted"] == HUGE - 1000
    assert job["task_counts"] == {"Pending": HUGE}

    first = served.http.get("/api/v1/jobs/huge/tasks", params={"limit": 3}).json()
    assert [t["index"] for t in first["items"]] == [0, 1, 2]
    second = served.http.get(
        "/api/v1/jobs/huge/tasks", params={"limit": 3, "after": first["next"]}
    ).json()
    assert [t["index"] for t in second["items"]] == [3, 4, 5]
    none = served.http.get("/api/v1/jobs/huge/tasks", params={"phase": "Running"}).json()
    assert none == {"items": [], "next": None}
