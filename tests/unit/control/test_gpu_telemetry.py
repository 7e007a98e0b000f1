"""GPU telemetry on the controller: a real store, the real sampler over a recorded NVML
(an 8-card H100 node), the real health rules and idle watch, and a clock the test moves.

The executor is the plane's fake, plus the one part under test here: its node's
``GpuSampler`` reads the recorded cards for the tasks it was asked to start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.intents import Intent
from phalanx.control.store import cards as stored_cards
from phalanx.control.store import gpu_use as stored_use
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import QueueRow
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.engine import default_config
from phalanx.executors.base import TaskEventKind
from phalanx.spec.loader import build_document
from phalanx.telemetry.readings import NodeSample, TaskCards
from phalanx.telemetry.recorded import MIB, RecordedNvml
from phalanx.telemetry.sampler import GpuSampler
from tests.unit.control.plane import TIMING, Clock, FakeExecutor, Plane

BOX = Node(
    name="box",
    capacity=Resources.of({"cpu": 64_000, "memory": 512 * 2**30, "gpu": 8}),
    gpus=tuple(Gpu(index=i, model="H100", memory=80 * 2**30) for i in range(8)),
)


@dataclass
class SampledExecutor(FakeExecutor):
    """The plane's fake executor, whose node reads its recorded cards every tick."""

    nvml: RecordedNvml = field(default_factory=lambda: RecordedNvml.load("h100-sxm-8"))
    clock: Clock = field(default_factory=Clock)
    sampler: GpuSampler = field(init=False)

    def __post_init__(self) -> None:
        self.sampler = GpuSampler("box", nvml=self.nvml, interval=1.0)

    def gpu_samples(self) -> list[NodeSample]:
        if not self.sampler.due(self.clock.now):
            return []
        stopped = {(e.job, e.task) for e in self.stopped}
        tasks = [
            TaskCards(job=b.job, task=b.task, gpus=b.gpus)
            for b in self.started
            if (b.job, b.task) not in stopped and b.gpus
        ]
        sample = self.sampler.sample(tasks, self.clock.now)
        return [] if sample is None else [sample]


def _queue(name: str, spec: dict[str, Any]) -> QueueRow:
    document = build_document(
        {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    )
    now = time.time()
    return QueueRow(
        name=name,
        parent="",
        document=document.model_dump(mode="json", by_alias=True, exclude_none=True),
        created_at=now,
        updated_at=now,
    )


@pytest.fixture
def box(tmp_path: Path) -> Iterator[tuple[Plane, SampledExecutor]]:
    db = Database.open(sqlite_url(tmp_path))
    with db.write() as session:
        session.add(_queue("q", {}))
        session.add(_queue("idle-stop", {"idleGpus": {"window": "2m", "action": "stop"}}))
        session.add(_queue("idle-mark", {"idleGpus": {"window": "2m"}}))
    clock = Clock()
    executor = SampledExecutor(clock=clock)
    controller = Controller(
        db, (BOX,), default_config(), lambda resolve: executor, timing=TIMING, clock=clock
    )
    controller.recover()
    yield Plane(db, controller, executor, clock), executor
    db.close()


def _gpus(count: int, command: str = "sleep 600", **extra: Any) -> list[dict[str, Any]]:
    return [{"name": "w", "replicas": 1, "resources": {"gpu": count}, "command": command, **extra}]


def _run(plane: Plane, name: str, **spec: Any) -> tuple[int, ...]:
    """Submit, place and start job ``name``; the cards its one task was given."""
    plane.submit(name, **spec)
    plane.tick()
    plane.report(TaskEventKind.STARTED, f"{name}-w-0")
    plane.tick()
    assert plane.job(name).phase == "Running"
    return tuple(plane.task(f"{name}-w-0").gpus or ())


def test_readings_are_attributed_and_folded_into_minute_windows(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, executor = box
    cards = _run(plane, "train", roles=_gpus(2))
    for card in cards:
        executor.nvml.set(card, utilisation=80, memory_used=30_000 * MIB)
    for _ in range(70):  # past a minute: one window closes and is stored
        plane.tick(after=1.0)
    picture = plane.controller.telemetry.picture
    node, use = picture.tasks[("train", "train-w-0")]
    assert node == "box" and use.gpus == cards
    assert use.utilisation == 80 and use.memory == 2 * 30_000 * MIB
    assert picture.owners["train"][1] == "q"
    holders = {key for key, tasks in picture.holders.items() if ("train", "train-w-0") in tasks}
    assert holders == {("box", card) for card in cards}
    with plane.db.session() as session:
        windows = stored_use.of_job(session, plane.job("train").id)
    assert len(windows) == 1
    (window,) = windows
    # A reading a second for a minute, of 2 cards; the first (as the task started) found
    # them idle, at the recording's 552 MiB each.
    assert window.samples == 120 and window.cards == 2
    assert window.utilisation == pytest.approx(80 * 118 / 120)
    assert window.utilisation_peak == 80 and window.memory_peak == 2 * 30_000 * MIB


def test_a_card_with_a_hardware_xid_is_cordoned_and_its_task_told(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, executor = box
    cards = _run(plane, "train", roles=_gpus(2))
    plane.tick()
    executor.nvml.raise_xid(cards[0], 79)  # fell off the bus
    plane.tick()
    with plane.db.session() as session:
        cordons = stored_cards.cordons(session)
    assert [(c.node, c.gpu, c.source) for c in cordons] == [("box", cards[0], "health")]
    assert "79" in cordons[0].reason
    told = plane.event_messages("train", "GpuUnhealthy")
    assert len(told) == 1 and f"GPU {cards[0]} of box" in told[0]
    assert plane.job("train").phase == "Running"  # the task goes on
    # Seven cards take work: an 8-card job waits.
    plane.submit("wide", roles=_gpus(8))
    plane.tick()
    assert plane.job("wide").phase in ("Pending", "Queued")
    assert "(of 7 GPUs)" in (plane.job("wide").message or "")


def test_an_admins_uncordon_brings_the_card_back_and_judges_it_afresh(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, executor = box
    plane.tick()
    executor.nvml.raise_xid(5, 48)  # double-bit ECC
    plane.tick()
    assert plane.controller.cluster.nodes[0].cordoned_gpus == frozenset({5})
    plane.submit("wide", roles=_gpus(8))
    plane.tick()
    assert not plane.executor.started
    with plane.db.write() as session:
        stored_cards.uncordon(session, "box", [5])
    plane.controller.wake(Intent.NODES)
    plane.tick()
    plane.tick()
    assert plane.controller.cluster.nodes[0].cordoned_gpus == frozenset()
    assert [b.job for b in plane.executor.started] == ["wide"]
    with plane.db.session() as session:
        assert stored_cards.cordons(session) == []  # no new XID: it stays back


def test_an_idle_job_in_a_stop_queue_is_stopped_with_the_reason(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, _ = box
    _run(plane, "notebook", queue="idle-stop", roles=_gpus(1))
    for _ in range(20):
        plane.tick(after=5.0)  # 100 s below 5%: not yet the window of 2m
    assert plane.job("notebook").phase == "Running"
    for _ in range(6):
        plane.tick(after=5.0)
    assert [e.job for e in plane.executor.stopped] == ["notebook"]
    plane.report(TaskEventKind.EXITED, "notebook-w-0", exit_code=143)
    plane.tick()
    job = plane.job("notebook")
    assert job.phase == "Failed"
    assert "below 5%" in (job.message or "") and "idle-stop" in (job.message or "")


def test_an_idle_job_in_a_mark_queue_is_marked_and_runs_on(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, _ = box
    _run(plane, "notebook", queue="idle-mark", roles=_gpus(1))
    for _ in range(30):
        plane.tick(after=5.0)
    assert plane.job("notebook").phase == "Running" and not plane.executor.stopped
    assert "notebook" in plane.controller.telemetry.picture.idle_since
    assert len(plane.event_messages("notebook", "Idle")) == 1


def test_a_busy_reading_keeps_a_job_from_being_judged_idle(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, executor = box
    (card,) = _run(plane, "train", queue="idle-stop", roles=_gpus(1))
    for step in range(40):
        executor.nvml.set(card, utilisation=60 if step % 10 == 0 else 0)
        plane.tick(after=5.0)
    assert plane.job("train").phase == "Running" and not plane.executor.stopped


def test_a_node_without_nvml_says_so_once(tmp_path: Path) -> None:
    db = Database.open(sqlite_url(tmp_path))
    clock = Clock()
    executor = SampledExecutor(nvml=RecordedNvml.absent(), clock=clock)
    controller = Controller(
        db, (BOX,), default_config(), lambda resolve: executor, timing=TIMING, clock=clock
    )
    controller.recover()
    plane = Plane(db, controller, executor, clock)
    for _ in range(5):
        plane.tick()
    assert executor.nvml.calls["nvmlInit"] == 1
    assert "NVML" in controller.telemetry.picture.absent["box"]
    db.close()


def test_yaml_of_an_idle_queue_loads() -> None:
    document = yaml.safe_load(
        "{apiVersion: phalanx/v1, kind: Queue, metadata: {name: x}, "
        "spec: {idleGpus: {threshold: 10%, window: 1h, action: stop}}}"
    )
    assert build_document(document).spec.idle_gpus is not None  # type: ignore[union-attr]


def test_a_node_that_stops_reporting_leaves_the_picture(
    box: tuple[Plane, SampledExecutor],
) -> None:
    plane, executor = box
    plane.tick()
    assert "box" in plane.controller.telemetry.picture.cards
    executor.sampler.interval = 10_000.0  # it reads no more
    plane.tick(after=100.0)
    assert "box" in plane.controller.telemetry.picture.cards  # within two minutes: shown
    plane.tick(after=30.0)
    assert plane.controller.telemetry.picture.cards == {}
