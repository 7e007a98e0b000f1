"""The ``plane`` fixture: a controller on a fresh SQLite store with one queue ``q``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import QueueRow
from phalanx.spec.loader import build_document
from tests.unit.control.plane import Clock, FakeExecutor, Plane, controller_on


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    db = Database.open(sqlite_url(tmp_path))
    queue = build_document(
        yaml.safe_load("{apiVersion: phalanx/v1, kind: Queue, metadata: {name: q}, spec: {}}")
    )
    with db.write() as session:
        now = time.time()
        session.add(
            QueueRow(
                name="q",
                parent="",
                document=queue.model_dump(mode="json", by_alias=True, exclude_none=True),
                created_at=now,
                updated_at=now,
            )
        )
    executor, clock = FakeExecutor(), Clock()
    yield Plane(db, controller_on(db, executor, clock), executor, clock)
    db.close()
