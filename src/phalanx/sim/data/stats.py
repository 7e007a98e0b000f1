"""What a run's data cost: cold bytes, start delays, hit rate: ``DataStats``.

Guarantees: every task start that reads a dataset is one sample (tasks reading none are
not counted); a start's delay is from its start to when the last of its datasets is on
its node; it is a hit when every one of them was held whole there when it started.
``summary()`` gives the ``DATA_FIGURES`` keys, rounded as the rest of summary.json.
"""

from __future__ import annotations

from typing import Final

import numpy as np

#: The summary keys of a run that modelled datasets, in the order tables show them.
DATA_FIGURES: Final = (
    "data_reads",
    "data_hit_rate",
    "data_cold_bytes",
    "data_delay_avg_s",
    "data_delay_p50_s",
    "data_delay_p95_s",
    "data_evictions",
    "data_uncached_reads",
)


class DataStats:
    """Collects each task start's data figures (see the module docstring)."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.hits = 0
        self.cold_bytes = 0
        self.uncached_reads = 0  # reads of a dataset that did not fit the node's cache
        self.evictions = 0

    def started(self, *, delay: float, cold_bytes: int, hit: bool, uncached: int) -> None:
        """One task start that read datasets: waited ``delay`` s for them, put
        ``cold_bytes`` on its node's link, found them all warm (``hit``), read
        ``uncached`` of them through."""
        self.delays.append(delay)
        self.hits += hit
        self.cold_bytes += cold_bytes
        self.uncached_reads += uncached

    def summary(self) -> dict[str, float | int]:
        """The ``DATA_FIGURES`` of the run."""
        delays = np.array(self.delays, dtype=float)
        reads = int(delays.size)
        return {
            "data_reads": reads,
            "data_hit_rate": round(self.hits / reads, 6) if reads else 0.0,
            "data_cold_bytes": self.cold_bytes,
            "data_delay_avg_s": round(float(delays.mean()), 3) if reads else 0.0,
            "data_delay_p50_s": round(float(np.percentile(delays, 50)), 3) if reads else 0.0,
            "data_delay_p95_s": round(float(np.percentile(delays, 95)), 3) if reads else 0.0,
            "data_evictions": self.evictions,
            "data_uncached_reads": self.uncached_reads,
        }
