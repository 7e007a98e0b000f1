"""The controller keeps the last session's places in line in its view, replaced after
every tick, and the API's job views show a place only while the stored job waits."""

from __future__ import annotations

from sqlalchemy import select

from phalanx.control.api.job_views import job_summaries, job_view
from phalanx.control.store.models import JobRow
from tests.unit.control.plane import Plane

WHOLE_NODE = [{"name": "w", "replicas": 1, "resources": {"gpu": 4}, "command": "true"}]


def test_places_are_replaced_after_every_tick_and_shown_only_while_waiting(plane: Plane) -> None:
    for name in ("a", "b", "c", "d"):  # two nodes of 4 GPUs: a and b run, c and d wait
        plane.submit(name, roles=WHOLE_NODE)
        plane.clock.now += 0.001  # arrival order is submission order
    plane.tick()
    plane.tick()
    assert dict(plane.controller.view.positions) == {"c": 1, "d": 2}
    with plane.db.session() as session:
        rows = session.scalars(select(JobRow).order_by(JobRow.id)).all()
        places = plane.controller.view.positions
        shown = {v.name: v.queue_position for v in job_summaries(session, rows, places)}
        assert shown == {"a": None, "b": None, "c": 1, "d": 2}
        # a place the view still holds for a job that has since started is not shown
        stale = {**places, "a": 3}
        assert job_view(session, rows[0], places=stale).queue_position is None
        assert job_view(session, rows[2]).queue_position is None  # no places given
    plane.controller.wake()  # nothing else changes: the places are the same next tick
    plane.tick()
    assert dict(plane.controller.view.positions) == {"c": 1, "d": 2}
