"""What the gateway answered for each predictor, counted since it started: ``Tallies``.

Guarantees:
- ``record`` counts one answer of a predictor (its status and its latency) exactly once,
  from any thread; ``read`` returns a consistent ``Tally`` (requests, 5xx answers and
  the latency histogram all from the same instant);
- tallies only grow, so the figures of a window are ``later.since(earlier)`` of two
  readings (what a rollout judges a step by); ``Tally.quantile`` estimates a latency
  quantile from the histogram as Prometheus's ``histogram_quantile`` does (linear within
  a bucket), so the figure a rollout acts on is the one the dashboard shows.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass
from typing import Final

#: Upper bounds (seconds) of the latency buckets; the last bucket is everything above.
LATENCY_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


@dataclass(frozen=True, slots=True)
class Tally:
    """Answers counted: ``requests``, ``errors`` (status 500 and above), and ``buckets``,
    the number of answers in each latency bucket (``LATENCY_BUCKETS``, then one more for
    those above the last bound)."""

    requests: int = 0
    errors: int = 0
    buckets: tuple[int, ...] = (0,) * (len(LATENCY_BUCKETS) + 1)

    def since(self, earlier: Tally) -> Tally:
        """What was counted after ``earlier`` (a reading of the same tally); a count that
        went down (a gateway that restarted, or stopped reporting) counts as none."""
        return Tally(
            requests=max(0, self.requests - earlier.requests),
            errors=max(0, self.errors - earlier.errors),
            buckets=tuple(
                max(0, a - b) for a, b in zip(self.buckets, earlier.buckets, strict=True)
            ),
        )

    def plus(self, other: Tally) -> Tally:
        """Both tallies together (the same predictor's answers at two gateways)."""
        return Tally(
            requests=self.requests + other.requests,
            errors=self.errors + other.errors,
            buckets=tuple(a + b for a, b in zip(self.buckets, other.buckets, strict=True)),
        )

    @property
    def error_rate(self) -> float:
        """The share of answers that were 5xx (0 with no answer)."""
        return self.errors / self.requests if self.requests else 0.0

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile of the latency (0 < q < 1), in seconds; None with no answer.
        Within the bucket that holds it, linear from the bucket's lower bound (0 for the
        first); in the last, open bucket: the largest bound, as Prometheus answers."""
        total = sum(self.buckets)
        if total == 0:
            return None
        rank = q * total
        below = 0
        for i, count in enumerate(self.buckets):
            if count and below + count >= rank:
                if i == len(LATENCY_BUCKETS):
                    return LATENCY_BUCKETS[-1]
                low = LATENCY_BUCKETS[i - 1] if i else 0.0
                return low + (LATENCY_BUCKETS[i] - low) * (rank - below) / count
            below += count
        return LATENCY_BUCKETS[-1]


class Tallies:
    """Each ``(service, predictor)``'s ``Tally`` (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], list[int]] = {}  # requests, errors, buckets...

    def record(self, service: str, predictor: str, status: int, seconds: float) -> None:
        """Count one answer of ``predictor`` of ``service``."""
        bucket = 2 + bisect.bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            counts = self._counts.get((service, predictor))
            if counts is None:
                counts = self._counts[(service, predictor)] = [0] * (len(LATENCY_BUCKETS) + 3)
            counts[0] += 1
            counts[1] += status >= 500
            counts[bucket] += 1

    def rows(self) -> list[tuple[str, str, Tally]]:
        """``(service, predictor, tally)`` of everything counted so far, in one reading."""
        with self._lock:
            return [
                (service, predictor, Tally(counts[0], counts[1], tuple(counts[2:])))
                for (service, predictor), counts in self._counts.items()
            ]

    def read(self, service: str, predictor: str) -> Tally:
        """Everything counted for ``predictor`` of ``service`` so far."""
        with self._lock:
            counts = self._counts.get((service, predictor))
            if counts is None:
                return Tally()
            return Tally(requests=counts[0], errors=counts[1], buckets=tuple(counts[2:]))
