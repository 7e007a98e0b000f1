"""The group-commit writer: each submission of a batch gets its own answer.

A batch mixes jobs for a missing queue, a parent queue, a queue whose ACL refuses the
submitter, a taken name and good jobs; the good ones are stored, each refusal names its
field, and nothing else is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from phalanx.control.auth import Principal, UserRole
from phalanx.control.batcher import SubmissionWriter
from phalanx.control.errors import ApiError
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import JobRow, QueueRow, TaskRow
from phalanx.spec.job import JobDocument
from phalanx.wire.views import JobView
from tests.integration.control import serving

ALICE = Principal(name="alice", role=UserRole.USER)
BOB = Principal(name="bob", role=UserRole.USER)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(serving.database_url(tmp_path) or sqlite_url(tmp_path))
    with database.session() as session:
        for name, parent, submitters in [
            ("team", "root", None),
            ("team-a", "team", ["alice"]),
            ("open", "root", None),
        ]:
            spec: dict[str, Any] = {"parent": parent}
            if submitters is not None:
                spec["submitters"] = submitters
            document = {"kind": "Queue", "metadata": {"name": name}, "spec": spec}
            row = QueueRow(name=name, parent=parent, document=document, created_at=0, updated_at=0)
            session.add(row)
    yield database
    database.close()


def job(name: str, queue: str, replicas: int = 1, user: str = "alice") -> JobDocument:
    return JobDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "queue": queue,
                "user": user,
                "roles": [
                    {
                        "name": "main",
                        "replicas": replicas,
                        "command": "true",
                        "resources": {"cpu": 1},
                    }
                ],
            },
        }
    )


def outcome(future: Future[JobView]) -> int | JobView:
    """The view of a stored job, or the refusal's status code."""
    error = future.exception(timeout=30)
    if error is None:
        return future.result()
    assert isinstance(error, ApiError)
    return error.status_code


def test_each_submission_of_a_batch_gets_its_own_answer(db: Database) -> None:
    writer = SubmissionWriter(db)
    try:
        first = outcome(writer.enqueue(job("taken", "open"), ALICE))
        assert isinstance(first, JobView)
        # Submitted back to back, these share batches however the writer cuts them.
        futures = {
            "good": writer.enqueue(job("good", "open", replicas=3), ALICE),
            "missing": writer.enqueue(job("missing", "nowhere"), ALICE),
            "parent": writer.enqueue(job("parent", "team"), ALICE),
            "acl": writer.enqueue(job("acl", "team-a", user="bob"), BOB),
            "taken": writer.enqueue(job("taken", "open"), ALICE),
            "allowed": writer.enqueue(job("allowed", "team-a"), ALICE),
        }
        answers = {name: outcome(future) for name, future in futures.items()}
    finally:
        writer.close()
    assert {k: v for k, v in answers.items() if isinstance(v, int)} == {
        "missing": 422,
        "parent": 422,
        "acl": 403,
        "taken": 409,
    }
    good = answers["good"]
    assert isinstance(good, JobView) and [t.name for t in good.tasks] == [
        "good-main-0",
        "good-main-1",
        "good-main-2",
    ]
    with db.session() as session:
        stored = set(session.scalars(select(JobRow.name)))
        tasks = session.scalar(select(func.count()).select_from(TaskRow))
    assert stored == {"taken", "good", "allowed"}
    assert tasks == 5


def test_refusals_name_the_field_and_the_fix(db: Database) -> None:
    writer = SubmissionWriter(db)
    try:
        refusals = [
            writer.enqueue(job("missing", "nowhere"), ALICE).exception(timeout=30),
            writer.enqueue(job("acl", "team-a", user="bob"), BOB).exception(timeout=30),
        ]
    finally:
        writer.close()
    for refusal in refusals:
        assert isinstance(refusal, ApiError)
        assert refusal.detail["field"] == "spec.queue" and refusal.detail["fix"]


def test_the_controller_is_handed_each_stored_job_once(db: Database) -> None:
    heard: list[tuple[int, str]] = []
    writer = SubmissionWriter(db, on_stored=lambda jobs: heard.extend((i, j.name) for i, j in jobs))
    try:
        outcome(writer.enqueue(job("first", "open"), ALICE))
        outcome(writer.enqueue(job("refused", "nowhere"), ALICE))
        outcome(writer.enqueue(job("second", "open", replicas=2), ALICE))
    finally:
        writer.close()
    with db.session() as session:
        stored = list(session.execute(select(JobRow.id, JobRow.name).order_by(JobRow.id)))
    assert (
        heard
        == [(row.id, row.name) for row in stored]
        == [
            (stored[0].id, "first"),
            (stored[1].id, "second"),
        ]
    )
