"""The model registrar on a real store and SQLite, without a server: a succeeded job's
model becomes a version once, also when the pass that copied it did not get to commit
(the copy is made again and nothing is stored twice); a job whose task ran on a Ray node
is read on that node (``Where.nodes``: its agent, here one that reads the same disk), and
refused with the reason when its task never ran on one; a job not succeeded is left
alone."""

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
from phalanx.control.store.models import JobRow, TaskRow
from phalanx.control.submit import store_jobs
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.process import dir_name
from phalanx.models.manifest import Manifest
from phalanx.models.store import ModelStore
from phalanx.spec.job import JobDocument
from phalanx.spec.loader import build_document
from phalanx.tenantfs import Limits, Place

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


class SameDisk:
    """A node's agent as ``NodeModels`` reaches it, its tasks dir on this disk: what it
    was asked, and the store's intake of that directory."""

    def __init__(self, tasks: Path, store: ModelStore) -> None:
        self.tasks, self.store = tasks, store
        self.asked: list[tuple[str, str, str, str]] = []

    def intake(
        self,
        node: str,
        job: str,
        task: str,
        path: str,
        *,
        identity: TaskIdentity | None,
        limits: Limits,
    ) -> Manifest:
        self.asked.append((node, job, task, path))
        place = Place(self.tasks, f"{dir_name(job)}/{dir_name(task)}/{path}")
        return self.store.intake(place, reader=None, limits=limits)


def registrar(db: Database, tmp_path: Path, *, nodes: SameDisk | None = None) -> ModelRegistrar:
    where = Where(tasks_dir=tmp_path / "tasks", nodes=nodes, identity_of=None)
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


def test_a_model_written_on_a_ray_node_is_read_there(db: Database, tmp_path: Path) -> None:
    job_id = submitted(db, tmp_path / "tasks")
    with db.write() as session:
        session.execute(update(TaskRow).where(TaskRow.job_id == job_id).values(node="ray-a"))
    nodes = SameDisk(tmp_path / "tasks", ModelStore(str(tmp_path / "models")))
    registrar(db, tmp_path, nodes=nodes).tick()
    assert nodes.asked == [("ray-a", "fit", "fit-trainer-0", "out")]
    ((kind, message),) = kinds(db, job_id)
    assert kind == "ModelRegistered" and message.startswith("mnist:v1 (sha256:")


def test_a_model_of_a_task_that_never_ran_on_a_node_is_refused_with_the_reason(
    db: Database, tmp_path: Path
) -> None:
    job_id = submitted(db, tmp_path / "tasks")
    nodes = SameDisk(tmp_path / "tasks", ModelStore(str(tmp_path / "models")))
    registrar(db, tmp_path, nodes=nodes).tick()
    assert nodes.asked == []
    ((kind, message),) = kinds(db, job_id)
    assert kind == "ModelNotRegistered" and "never ran on a node" in message
    with db.session() as session:
        assert stored.owed(session, 8) == [] and stored.versions(session, "mnist") == []


def test_a_job_that_did_not_succeed_owes_nothing(db: Database, tmp_path: Path) -> None:
    job_id = submitted(db, tmp_path / "tasks", phase="Failed")
    registrar(db, tmp_path).tick()
    assert kinds(db, job_id) == []
    with db.session() as session:
        assert stored.versions(session, "mnist") == []
