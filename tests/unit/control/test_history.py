"""The metrics history: bounded, bucketed by time, deterministic under a fake clock, and
fed by the controller's sessions and ticks."""

from __future__ import annotations

import pytest

from phalanx.control.controllers.controller import Controller
from phalanx.control.history import BUCKET_SECONDS, BUCKETS_KEPT, Bucket, History
from phalanx.control.metrics import Metrics
from phalanx.engine import default_config
from tests.unit.control.plane import NODES, TIMING, Plane


def test_six_hours_of_ten_second_buckets_by_default() -> None:
    assert BUCKET_SECONDS * BUCKETS_KEPT == 6 * 3600
    assert History().capacity == BUCKETS_KEPT


def test_records_in_one_bucket_are_aggregated() -> None:
    history = History(width=10.0, capacity=5)
    history.session(now=1000.0, seconds=0.2, started=2, evicted=1)
    history.session(now=1009.9, seconds=0.4, started=1, evicted=0)
    history.gauges(now=1003.0, pending=7, gpu_ratio=0.25)
    history.gauges(now=1005.0, pending=4, gpu_ratio=0.5)

    assert history.buckets() == [
        Bucket(
            start=1000.0,
            sessions=2,
            session_mean=pytest.approx(0.3),
            session_max=0.4,
            started=3,
            evicted=1,
            pending=4,  # the last seen
            gpu_ratio=0.5,
        )
    ]


def test_buckets_start_at_multiples_of_the_width_and_skip_silent_times() -> None:
    history = History(width=10.0, capacity=5)
    for now in (1001.0, 1012.0, 1019.0, 1055.0):
        history.gauges(now=now, pending=1, gpu_ratio=0.0)

    assert [b.start for b in history.buckets()] == [1000.0, 1010.0, 1050.0]
    assert [b.start for b in history.buckets(since=1010.0)] == [1010.0, 1050.0]
    assert history.buckets()[0].sessions == 0 and history.buckets()[0].session_mean == 0.0


def test_the_history_keeps_the_newest_buckets_only() -> None:
    history = History(width=10.0, capacity=3)
    for i in range(10):
        history.session(now=10.0 * i, seconds=0.1, started=i, evicted=0)

    assert [(b.start, b.started) for b in history.buckets()] == [(70.0, 7), (80.0, 8), (90.0, 9)]


def test_a_clock_stepped_back_counts_in_the_newest_bucket() -> None:
    history = History(width=10.0, capacity=3)
    history.gauges(now=100.0, pending=1, gpu_ratio=0.0)
    history.gauges(now=50.0, pending=2, gpu_ratio=0.0)

    assert [(b.start, b.pending) for b in history.buckets()] == [(100.0, 2)]


def test_a_history_needs_room() -> None:
    with pytest.raises(ValueError, match="positive bucket width"):
        History(width=0.0)
    with pytest.raises(ValueError, match="at least one bucket"):
        History(capacity=0)


def test_the_controller_records_sessions_and_gauges(plane: Plane) -> None:
    metrics = Metrics(History(width=10.0, capacity=100))
    controller = Controller(
        plane.db,
        NODES,
        default_config(),
        lambda resolve: plane.executor,
        timing=TIMING,
        clock=plane.clock,
        metrics=metrics,
    )
    controller.recover()
    plane.controller = controller
    plane.clock.now = (plane.clock.now // 10.0) * 10.0 + 1  # just after a bucket's start
    for name in ("a", "b"):
        plane.submit(
            name, roles=[{"name": "w", "replicas": 1, "resources": {"gpu": 4}, "command": "true"}]
        )
    plane.submit(
        "c", roles=[{"name": "w", "replicas": 1, "resources": {"gpu": 8}, "command": "true"}]
    )
    plane.tick(after=0.5)
    plane.tick(after=0.5)

    (bucket,) = metrics.history.buckets()
    assert bucket.sessions >= 1 and bucket.session_max >= bucket.session_mean > 0
    assert bucket.started == 2  # a and b fill both nodes; c waits
    assert bucket.evicted == 0
    assert bucket.pending == 1
    assert bucket.gpu_ratio == 1.0
