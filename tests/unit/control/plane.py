"""A controller on a real SQLite store, with a fake executor and a clock the test moves."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.core import Timing
from phalanx.control.controllers.intents import Intent
from phalanx.control.store.database import Database
from phalanx.control.store.models import EventRow, JobRow, TaskRow
from phalanx.control.submit import store_jobs
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.engine import default_config
from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.records import ProcessRecord
from phalanx.spec.job import JobDocument
from phalanx.spec.loader import build_document

TIMING = Timing(period=1.0, grace=1.0, backoff=10.0, max_backoff=300.0)
NODES = tuple(
    Node(name=f"n{i}", capacity=Resources.of({"cpu": 8000, "memory": 32 * 2**30, "gpu": 4}))
    for i in range(2)
)


@dataclass
class FakeExecutor:
    """Remembers what it was asked; reports only what the test tells it to."""

    started: list[Bind] = field(default_factory=list)
    stopped: list[Evict] = field(default_factory=list)
    reports: list[TaskEvent] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)  # jobs whose start raises
    known: dict[tuple[str, str], ProcessRecord] = field(default_factory=dict)
    adopted: list[ProcessRecord] = field(default_factory=list)

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        if any(b.job in self.refuse for b in binds):
            raise ValueError("no such image")
        self.started.extend(binds)

    def stop(self, evictions: Sequence[Evict], *, now: float, grace: float) -> None:
        self.stopped.extend(evictions)

    def poll(self, *, now: float) -> list[TaskEvent]:
        due, self.reports = self.reports, []
        return due

    def records(self) -> list[ProcessRecord]:
        return []

    def recorded(self, job: str, task: str) -> ProcessRecord | None:
        return self.known.get((job, task))

    def adopt(self, records: Iterable[ProcessRecord], *, now: float) -> None:
        self.adopted.extend(records)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()  # jobs are stored with the wall time; ticks move from there

    def __call__(self) -> float:
        return self.now


@dataclass
class Plane:
    """A controller, its store, its fake executor and its clock."""

    db: Database
    controller: Controller
    executor: FakeExecutor
    clock: Clock

    def submit(self, name: str, **spec: Any) -> None:
        spec.setdefault("queue", "q")
        spec.setdefault(
            "roles", [{"name": "w", "replicas": 1, "resources": {"gpu": 1}, "command": "true"}]
        )
        raw = {"apiVersion": "phalanx/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
        document = build_document(raw)
        assert isinstance(document, JobDocument)
        with self.db.write() as session:
            store_jobs(session, [document])
        self.controller.wake(Intent.JOBS)

    def tick(self, after: float = 1.0) -> None:
        self.clock.now += after
        self.controller.tick()

    def report(self, kind: TaskEventKind, task: str, **fields: Any) -> None:
        """Report ``kind`` for ``task`` from the node the store says it is on."""
        job, node = task.rsplit("-", 2)[0], self.task(task).node
        assert node is not None, f"{task} is on no node"
        self.executor.reports.append(
            TaskEvent(kind=kind, time=self.clock.now, job=job, task=task, node=node, **fields)
        )

    def job(self, name: str) -> JobRow:
        with self.db.session() as session:
            row = session.scalar(select(JobRow).where(JobRow.name == name))
            assert row is not None
            return row

    def task(self, name: str) -> TaskRow:
        with self.db.session() as session:
            row = session.scalar(select(TaskRow).where(TaskRow.name == name))
            assert row is not None
            return row

    def events(self, name: str) -> list[str]:
        with self.db.session() as session:
            job_id = self.job(name).id
            rows = session.scalars(
                select(EventRow).where(EventRow.job_id == job_id).order_by(EventRow.id)
            )
            return [row.kind for row in rows]

    def event_messages(self, name: str, kind: str) -> list[str]:
        """The messages of the job's events of ``kind``, oldest first."""
        with self.db.session() as session:
            job_id = self.job(name).id
            rows = session.scalars(
                select(EventRow)
                .where(EventRow.job_id == job_id, EventRow.kind == kind)
                .order_by(EventRow.id)
            )
            return [row.message for row in rows]

    def restart(self, executor: FakeExecutor | None = None) -> Plane:
        """A new controller on the same store, as after a crash of the server."""
        fresh = executor or FakeExecutor()
        return Plane(self.db, controller_on(self.db, fresh, self.clock), fresh, self.clock)


def controller_on(db: Database, executor: FakeExecutor, clock: Clock) -> Controller:
    controller = Controller(
        db, NODES, default_config(), lambda resolve: executor, timing=TIMING, clock=clock
    )
    controller.recover()
    return controller
