"""The model registrar on a real store and SQLite, without a server: a succeeded job's
model becomes a version once, also when the pass that copied it did not get to commit
(the copy is made again and nothing is stored twice); a job whose task ran on a Ray node
is refused with that reason; a job not succeeded is left alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import update

from phalanx.control.controllers.models import ModelRegistrar, Where
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import model_versions as stored
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import JobRow
from phalanx.control.submit import store_jobs
from phalanx.executors.process import dir_name
from phalanx.models.store import ModelStore
from phalanx.spec.job import JobDocument
from phalanx.spec.loader import build_document

JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: fit}
spec:
  roles:
  - {name: trainer, replicas: 2, resources: {cpu: 1}, model: {name: mnist, path: out}}
"""


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    opened = Database.open(sqlite_url(tmp_path))
    yield opened
    opened.close()


def submitted(db: Database, tasks: Path, phase: str = "Succeeded") -> int:
    """Job fit stored in ``phase``; its first task wrote ``out/w`` under ``tasks``."""
    document = build_document(yaml.safe_load(JOB))
    assert isinstance(document, JobDocument)
    with db.write() as session:
        (job,) = store_jobs(session, [document])
        session.execute(update(JobRow).where(JobRow.id == job.id).values(phase=phase))
    model = tasks / dir_name("fit") / dir_name("fit-trainer-0") / "out"
    model.mkdir(parents=True)
    (model / "w").write_bytes(b"weights")
    return job.id


def registrar(db: Database, tmp_path: Path, *, on_this_host: bool = True) -> ModelRegistrar:
    where = Where(tasks_dir=tmp_path / "tasks", on_this_host=on_this_host, identity_of=None)
    return ModelRegistrar(db, ModelStore(str(tmp_path / "models")), where)


def kinds(db: Database, job_id: int) -> list[tuple[str, str]]:
    with db.session() as session:
        return [(e.kind, e.message) for e in stored_jobs.events(session, job_id)]


def test_a_pass_cut_short_before_its_commit_registers_once_on_the_next(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submitted(db, tmp_path / "tasks")
    models = registrar(db, tmp_path)

    def crash(*_: object, **__: object) -> None:
        raise RuntimeError("the server died here")

    monkeypatch.setattr(stored, "settle", crash)
    models.tick()  # copied, then the transaction never committed
    with db.session() as session:
        assert stored.versions(session, "mnist") == []
        assert [row.id for row in stored.owed(session, 8)] == [job_id]
    monkeypatch.undo()
    models.tick()
    with db.session() as session:
        (version,) = stored.versions(session, "mnist")
        assert (version.version, version.job, version.role, version.files) == (
            1,
            "fit",
            "trainer",
            1,
        )
        assert stored.owed(session, 8) == []
    (registered,) = kinds(db, job_id)
    assert registered[0] == "ModelRegistered" and registered[1].startswith("mnist:v1 (sha256:")
    blobs = [p for p in (tmp_path / "models" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 1  # the first pass's copy was the same content: stored once
    models.tick()  # nothing owed: nothing changes
    with db.session() as session:
        assert len(stored.versions(session, "mnist")) == 1


def test_a_model_written_on_a_ray_node_is_refused_with_the_reason(
    db: Database, tmp_path: Path
) -> None:
    job_id = submitted(db, tmp_path / "tasks")
    registrar(db, tmp_path, on_this_host=False).tick()
    ((kind, message),) = kinds(db, job_id)
    assert kind == "ModelNotRegistered"
    assert "ran on a Ray node" in message and "fix:" in message
    with db.session() as session:
        assert stored.owed(session, 8) == [] and stored.versions(session, "mnist") == []


def test_a_job_that_did_not_succeed_owes_nothing(db: Database, tmp_path: Path) -> None:
    job_id = submitted(db, tmp_path / "tasks", phase="Failed")
    registrar(db, tmp_path).tick()
    assert kinds(db, job_id) == []
    with db.session() as session:
        assert stored.versions(session, "mnist") == []
