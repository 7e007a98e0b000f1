"""The accounting ledger written by the controller, at the lifecycle's own times: a
fake executor and an injected clock, so every time is known to the microsecond."""

from __future__ import annotations

from sqlalchemy import update

from phalanx.control.controllers.intents import Intent
from phalanx.control.store import usage
from phalanx.control.store.models import JobRow
from phalanx.control.store.usage import Allocation
from phalanx.executors.base import TaskEventKind
from tests.unit.control.plane import Plane


def _ledger(plane: Plane, job: str | None = None) -> list[Allocation]:
    with plane.db.session() as session:
        return usage.overlapping(session, job=job)


def test_a_task_holds_its_node_from_its_bind_to_its_exit(plane: Plane) -> None:
    plane.submit("a")
    plane.tick()
    bound = plane.clock.now
    plane.clock.now += 2.5
    plane.report(TaskEventKind.STARTED, "a-w-0")
    plane.tick(0.5)
    plane.clock.now += 2.75  # reports carry the executor's time; the tick comes later
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=0)
    plane.tick(0.5)
    (held,) = _ledger(plane)
    assert (held.job, held.task, held.user, held.queue, held.node) == (
        "a",
        "a-w-0",
        "default",
        "q",
        "n0",
    )
    assert (held.start, held.end, held.ended_by) == (bound, bound + 5.75, "Succeeded")
    assert held.end == plane.task("a-w-0").finished_at
    assert held.resources == {"gpu": 1.0} and not held.reclaimable and not held.elastic


def test_a_retry_closes_the_first_placement_and_opens_a_second(plane: Plane) -> None:
    plane.submit("a", maxRetry=1)
    plane.tick()
    first = plane.clock.now
    plane.clock.now += 4.0
    plane.report(TaskEventKind.LOST, "a-w-0")
    plane.tick(0.25)  # placed again at once: a lost node costs no backoff
    placements = _ledger(plane)
    assert [(p.start, p.end) for p in placements] == [
        (first, first + 4.0),
        (first + 4.25, None),
    ]
    assert placements[0].ended_by == "Failed"


def test_an_open_allocation_survives_a_restart_and_a_task_lost_then_closes_at_its_time(
    plane: Plane,
) -> None:
    plane.submit("a")
    plane.tick()
    bound = plane.clock.now
    plane.report(TaskEventKind.STARTED, "a-w-0")
    plane.tick()
    # the server stops; no record of the task's process was stored: it is lost at start-up
    plane.clock.now += 10.0
    after = plane.restart()
    (held,) = [p for p in _ledger(after) if p.end is not None]
    assert (held.start, held.end) == (bound, plane.clock.now)


def test_a_cancelled_job_closes_its_allocations_when_its_tasks_stop(plane: Plane) -> None:
    plane.submit("a", roles=[{"name": "w", "replicas": 2, "resources": {"gpu": 1}, "command": "x"}])
    plane.tick()
    for task in ("a-w-0", "a-w-1"):
        plane.report(TaskEventKind.STARTED, task)
    plane.tick()
    with plane.db.write() as session:
        session.execute(update(JobRow).where(JobRow.name == "a").values(cancel_requested=True))
    plane.controller.wake(Intent.CANCELS)
    plane.tick()
    plane.clock.now += 1.5
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=143, stopped=True)
    exited = plane.clock.now
    plane.tick(0.5)
    ends = {p.task: (p.end, p.ended_by) for p in _ledger(plane)}
    assert ends["a-w-0"] == (exited, "cancel")
    assert ends["a-w-1"][0] is None  # still stopping
    plane.report(TaskEventKind.EXITED, "a-w-1", exit_code=143, stopped=True)
    plane.tick(0.5)
    assert plane.job("a").phase == "Cancelled"
    assert all(p.end is not None for p in _ledger(plane))
