"""The controller publishes each waiting job's multifactor priority in its view after
every tick (the fairshare plugin's own factors, at the tick's time), and the API's job
view shows it only while the stored job waits."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from phalanx.control.api.job_views import job_view
from phalanx.control.controllers.controller import Controller
from phalanx.control.store.models import JobRow
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.plugins.fairshare import FairsharePlugin, Multifactor
from phalanx.executors.base import TaskEventKind
from tests.unit.control.plane import NODES, TIMING, Plane

WHOLE_NODE = [{"name": "w", "replicas": 1, "resources": {"gpu": 4}, "command": "true"}]
BOTH_NODES = [{"name": "w", "replicas": 2, "resources": {"gpu": 4}, "command": "true"}]


def _waiting_behind_a_heavy_user(plane: Plane) -> None:
    """alice ran a job and holds both nodes; then alice and bob each submit one that waits."""
    plane.submit("used", user="alice", roles=WHOLE_NODE)
    plane.tick()
    plane.report(TaskEventKind.STARTED, "used-w-0")
    plane.tick(after=100.0)
    plane.report(TaskEventKind.EXITED, "used-w-0", exit_code=0)
    plane.tick()
    assert plane.job("used").phase == "Succeeded"
    plane.submit("hold", user="alice", roles=BOTH_NODES)
    plane.tick()
    assert plane.job("hold").phase in ("Running", "Queued")
    plane.submit("a", user="alice")
    plane.submit("b", user="bob")
    plane.tick()
    plane.tick()


def test_waiting_jobs_get_the_plugins_factors_at_the_ticks_time(plane: Plane) -> None:
    _waiting_behind_a_heavy_user(plane)
    view = plane.controller.view
    assert view.fairshare
    assert set(view.priorities) == {"a", "b"}  # the running ones have none
    a, b = view.priorities["a"], view.priorities["b"]
    # alice has all of queue q's usage and shares it with bob: 2 ** (-1 * 2); bob none: 1
    assert a.fair_share == pytest.approx(0.25)
    assert b.fair_share == 1.0
    assert b.total > a.total
    assert (a.user, a.queue, b.user) == ("alice", "q", "bob")
    assert dict(a.weights) == {"age": 1.0, "fairShare": 1.0, "size": 0.0, "priority": 0.0}
    assert a.time == b.time == view.time == plane.clock.now
    state = plane.controller.core.state.snapshot
    expected = Multifactor(FairsharePlugin(), state, view.time).factors(state.jobs["a"])
    assert (a.age, a.fair_share, a.size, a.priority, a.total) == (
        expected.age,
        expected.fair_share,
        expected.size,
        expected.priority,
        expected.total,
    )
    assert a.total == pytest.approx(a.age + a.fair_share)

    with plane.db.session() as session:
        rows = {r.name: r for r in session.scalars(select(JobRow))}
        shown = job_view(session, rows["b"], priorities=view.priorities).priority
        assert shown is not None
        assert shown.factors.fair_share == 1.0 and shown.weights.fair_share == 1.0
        assert shown.total == b.total
        assert shown.line().startswith(f"{b.total:.2f} (age ")
        # one GPU of the eight: size 1/8, weighed 0 by default
        assert "fair-share 1.00 x1, size 0.12 x0, class 0.00 x0)" in shown.line()
        # what the view still says of a job that has since started is stale: not shown
        stale = {**view.priorities, "hold": a}
        assert job_view(session, rows["hold"], priorities=stale).priority is None
        assert job_view(session, rows["a"]).priority is None  # no priorities given

    plane.report(TaskEventKind.STARTED, "hold-w-0")
    plane.report(TaskEventKind.STARTED, "hold-w-1")
    plane.tick()
    plane.report(TaskEventKind.EXITED, "hold-w-0", exit_code=0)
    plane.report(TaskEventKind.EXITED, "hold-w-1", exit_code=0)
    plane.tick()
    plane.tick()
    assert plane.job("a").phase != "Pending" and plane.job("b").phase != "Pending"
    assert dict(plane.controller.view.priorities) == {}  # nothing waits now


def test_a_config_without_fairshare_publishes_no_priorities(plane: Plane) -> None:
    config = SchedulerConfig.build(
        ["enqueue", "allocate"], [["priority", "gang"], ["drf", "predicates", "capacity"]]
    )
    executor = plane.executor
    controller = Controller(
        plane.db, NODES, config, lambda resolve: executor, timing=TIMING, clock=plane.clock
    )
    controller.recover()
    bare = Plane(plane.db, controller, executor, plane.clock)
    for name in ("a", "b", "c"):
        bare.submit(name, roles=WHOLE_NODE)
    bare.tick()
    bare.tick()
    assert dict(controller.view.positions) == {"c": 1}  # it ranks; it has no factors
    assert not controller.view.fairshare
    assert dict(controller.view.priorities) == {}


def test_a_restarted_server_remembers_who_used_the_queue(plane: Plane) -> None:
    """Usage lives in the accounting ledger: a restart banks it into the new engine
    state, so alice's past still weighs against her after it."""
    _waiting_behind_a_heavy_user(plane)
    before = plane.controller.view.priorities
    again = plane.restart(plane.executor)  # its tasks live on: taken back
    again.tick()
    after = again.controller.view.priorities
    assert before["a"].fair_share == 0.25  # alice had all the queue's use, bob none
    assert after["a"].fair_share == pytest.approx(0.25, abs=1e-3)
    # hold's tasks had not started: the restart gives its nodes back, and bob goes first
    assert again.job("b").phase == "Running" and again.job("a").phase == "Pending"
