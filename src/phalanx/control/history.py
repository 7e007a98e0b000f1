"""The server's own recent metrics, for the console's charts: a bounded ring of time
buckets kept in memory (not a Prometheus: nothing survives a restart).

Guarantees: at most ``capacity`` buckets are kept, the newest; a bucket covers
``[start, start + width)`` with ``start`` a multiple of ``width``; buckets come out in
time order, and only buckets something was recorded in (a gap is a time the server
recorded nothing: it was not running). The history never reads the clock: every record
carries its ``now``, so a fake clock makes it deterministic. Thread-safe: the controller
records, API requests read.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Final

#: Seconds one bucket covers.
BUCKET_SECONDS: Final = 10.0
#: Buckets kept: six hours of 10-second buckets.
BUCKETS_KEPT: Final = 6 * 3600 // int(BUCKET_SECONDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bucket:
    """What happened in ``[start, start + width)``: the scheduling sessions (how many,
    their mean and longest duration in seconds), the jobs they started (bound), the tasks
    they evicted (preemption and reclaim), and the last pending count and GPU allocation
    ratio seen (None: no tick recorded them)."""

    start: float
    sessions: int = 0
    session_mean: float = 0.0
    session_max: float = 0.0
    started: int = 0
    evicted: int = 0
    pending: int | None = None
    gpu_ratio: float | None = None


class _Open:
    """The bucket being filled (mutable; frozen into a ``Bucket`` when read)."""

    __slots__ = (
        "evicted",
        "gpu_ratio",
        "longest",
        "pending",
        "sessions",
        "start",
        "started",
        "total",
    )

    def __init__(self, start: float) -> None:
        self.start = start
        self.sessions = 0
        self.total = 0.0
        self.longest = 0.0
        self.started = 0
        self.evicted = 0
        self.pending: int | None = None
        self.gpu_ratio: float | None = None

    def frozen(self) -> Bucket:
        return Bucket(
            start=self.start,
            sessions=self.sessions,
            session_mean=self.total / self.sessions if self.sessions else 0.0,
            session_max=self.longest,
            started=self.started,
            evicted=self.evicted,
            pending=self.pending,
            gpu_ratio=self.gpu_ratio,
        )


class History:
    """The last ``capacity`` buckets of ``width`` seconds."""

    def __init__(self, *, width: float = BUCKET_SECONDS, capacity: int = BUCKETS_KEPT) -> None:
        if width <= 0 or capacity < 1:
            raise ValueError("a history needs a positive bucket width and at least one bucket")
        self.width = width
        self.capacity = capacity
        self._ring: deque[_Open] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def session(self, *, now: float, seconds: float, started: int, evicted: int) -> None:
        """Record one scheduling session that took ``seconds``, bound ``started`` jobs and
        evicted ``evicted`` tasks."""
        with self._lock:
            bucket = self._at(now)
            bucket.sessions += 1
            bucket.total += seconds
            bucket.longest = max(bucket.longest, seconds)
            bucket.started += started
            bucket.evicted += evicted

    def gauges(self, *, now: float, pending: int, gpu_ratio: float) -> None:
        """Record the pending count and GPU allocation ratio as of ``now`` (the bucket
        keeps the last)."""
        with self._lock:
            bucket = self._at(now)
            bucket.pending = pending
            bucket.gpu_ratio = gpu_ratio

    def buckets(self, *, since: float | None = None) -> list[Bucket]:
        """The kept buckets in time order (those starting at or after ``since`` when
        given)."""
        with self._lock:
            return [b.frozen() for b in self._ring if since is None or b.start >= since]

    def _at(self, now: float) -> _Open:
        """The bucket holding ``now``: the newest, or a new one after it. A time before
        the newest bucket (a clock stepped back) counts in the newest."""
        start = math.floor(now / self.width) * self.width
        if self._ring and start <= self._ring[-1].start:
            return self._ring[-1]
        opened = _Open(start)
        self._ring.append(opened)  # the deque drops the oldest beyond ``capacity``
        return opened
