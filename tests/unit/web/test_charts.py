"""The admin view's charts: x by time over the window, y up to the peak; counters read 0
where the server recorded nothing, gauges break their line there."""

from __future__ import annotations

from typing import Any

from phalanx.client import HistoryBucketView, HistoryView
from phalanx.web.charts import WIDTH, charts


def bucket(start: float, **fields: Any) -> HistoryBucketView:
    base: dict[str, Any] = {"sessions": 0, "session_mean": 0.0, "session_max": 0.0}
    base.update({"started": 0, "evicted": 0})
    return HistoryBucketView(start=start, **{**base, **fields})


def test_each_series_is_drawn_over_the_window() -> None:
    history = HistoryView(
        bucket_seconds=10.0,
        retention_seconds=600.0,
        buckets=[
            bucket(0.0, sessions=1, session_mean=0.01, session_max=0.02, started=2, pending=4),
            bucket(10.0, started=1, pending=2, gpu_ratio=0.5),
            bucket(30.0, sessions=2, session_mean=0.03, session_max=0.05, evicted=1, pending=0),
        ],
    )
    drawn = {c.key: c for c in charts(history, now=40.0, window=40.0)}

    assert list(drawn) == [
        "latency-mean",
        "latency-max",
        "started",
        "evicted",
        "pending",
        "gpu-ratio",
    ]
    started = drawn["started"]
    assert (started.points, started.total, started.peak) == (4, 3, 2)  # 2, 1, 0 (silent), 0
    # x: 300 px over 40 s; y: 2 px padding, the peak at the top
    assert started.lines == ("0.0,2.0 75.0,24.0 150.0,46.0 225.0,46.0",)
    pending = drawn["pending"]
    assert len(pending.lines) == 2  # no tick at 20: the line breaks
    assert pending.latest == 0 and pending.peak == 4
    latency = drawn["latency-max"]
    assert latency.unit == "ms" and latency.peak == 50.0 and latency.latest == 50.0
    assert len(latency.lines) == 2
    assert all(float(p.split(",")[0]) <= WIDTH for line in latency.lines for p in line.split())
    ratio = drawn["gpu-ratio"]
    assert ratio.latest == 50.0 and ratio.lines == ("75.0,2.0 76.5,2.0",)  # a lone point


def test_an_empty_history_draws_nothing() -> None:
    empty = HistoryView(bucket_seconds=10.0, retention_seconds=600.0, buckets=[])
    for chart in charts(empty, now=1000.0):
        assert chart.lines == () and chart.latest is None and chart.points == 0
