"""Queue views: a queue deserves its guarantee from the start, then the share the last
session computed; ``phalanx_queue_over_quota`` reads the computed share only."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from phalanx.control.api.queues import _view
from phalanx.control.controllers.intents import Intent
from phalanx.control.metrics import Metrics
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import QueueRow
from phalanx.spec.loader import build_document
from tests.unit.control.plane import Clock, FakeExecutor, Plane, controller_on


def _row(name: str, spec: str) -> QueueRow:
    raw = f"{{apiVersion: phalanx/v1, kind: Queue, metadata: {{name: {name}}}, spec: {spec}}}"
    document = build_document(yaml.safe_load(raw))
    now = time.time()
    return QueueRow(
        name=name,
        parent="",
        document=document.model_dump(mode="json", by_alias=True, exclude_none=True),
        created_at=now,
        updated_at=now,
    )


def test_a_queue_with_a_guarantee_deserves_it_before_any_job_arrives(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path))
    with db.write() as session:
        session.add(_row("g", "{guarantee: {gpu: 4}}"))
        session.add(_row("plain", "{}"))
    controller = controller_on(db, FakeExecutor(), Clock())
    try:
        controller.tick()  # nothing waits: no session runs

        queues = controller.view.queues
        assert queues["g"].deserved.get("gpu") == 4
        assert queues["plain"].deserved.get("gpu", 0) == 0
    finally:
        db.close()


def test_a_queue_not_yet_in_the_view_shows_its_guarantee_as_deserved() -> None:
    view = _view(_row("new", "{guarantee: {gpu: 8}}"), None, {})

    assert view.deserved == {"gpu": 8} and view.guarantee == {"gpu": 8}


def _over_quota(plane: Plane) -> dict[str, float]:
    metrics = Metrics()
    metrics.watch(plane.db, lambda: plane.controller.view)
    return {
        sample.labels["queue"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "phalanx_queue_over_quota"
        for sample in family.samples
    }


def test_a_lone_queue_without_a_guarantee_holding_a_gpu_is_not_over_quota(plane: Plane) -> None:
    plane.submit("a")
    plane.tick()
    plane.tick()

    usage = plane.controller.view.queues["q"]
    assert usage.allocated["gpu"] == 1
    # the share the session computed, not the guarantee (the fork reverts its own copy)
    assert usage.computed and usage.deserved["gpu"] >= 1
    assert _over_quota(plane)["q"] == 0.0


def test_a_queue_whose_share_no_session_computed_is_not_over_quota(plane: Plane) -> None:
    plane.submit("a")
    plane.tick()
    plane.tick()
    with plane.db.write() as session:  # an admin edits the queue: the state is rebuilt
        row = session.get(QueueRow, "q")
        assert row is not None
        row.updated_at += 1
    plane.controller.wake(Intent.QUEUES)
    plane.tick()  # nothing waits: no session runs

    usage = plane.controller.view.queues["q"]
    assert usage.allocated["gpu"] == 1 and not usage.computed
    assert usage.deserved.get("gpu", 0) == 0
    assert _over_quota(plane)["q"] == 0.0
