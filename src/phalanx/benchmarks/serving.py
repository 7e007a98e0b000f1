"""Waiting for a server process the benchmarks started."""

from __future__ import annotations

import math
import statistics
import subprocess
import time
from collections.abc import Sequence

import httpx


def wait_answering(url: str, process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until the server at ``url`` answers ``/healthz`` with 200: True then, False
    once ``process`` has exited or ``timeout`` seconds have passed without an answer."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


# -- scaling figures (bench/serving_scale.py) --------------------------------------------------


def median(values: Sequence[float]) -> float | None:
    """The median of ``values`` (the mean of the middle two for an even count); None for
    none."""
    if not values:
        return None
    return statistics.median(values)


def reached_at(series: Sequence[tuple[float, int]], count: int) -> float | None:
    """The first time in ``series`` (time, replicas Ready), in order of time, at which
    ``count`` replicas were Ready; None when it never was."""
    return next((at for at, ready in series if ready >= count), None)


def recovered_at(
    samples: Sequence[tuple[float, float]], *, threshold: float, window: float
) -> float | None:
    """When the p50 latency fell back under ``threshold`` for good: ``samples`` are
    (when the request was sent, its latency), times counted from the burst's start, cut
    into windows of ``window`` seconds by when they were sent; the answer is the start of
    the first window from which the median latency of every window that holds requests,
    to the last, is under ``threshold`` (0.0: it never rose above it); None when the last
    window is still above it."""
    windows: dict[int, list[float]] = {}
    for sent, latency in samples:
        windows.setdefault(max(0, math.floor(sent / window)), []).append(latency)
    recovered: int | None = None
    for index in sorted(windows):
        if statistics.median(windows[index]) < threshold:
            if recovered is None:
                recovered = index
        else:
            recovered = None
    return None if recovered is None else recovered * window
