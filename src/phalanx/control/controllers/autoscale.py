"""How many replicas a predictor wants, from the requests it has in flight: Knative's
KPA, as ``Autoscaler``.

Each pass gives ``observe`` the predictor's demand: requests in flight at its replicas
plus its share of those the gateway holds. From the average demand over a window,
desired = ceil(average / (target x utilization)), the target being the in-flight
requests one replica should carry:
- **stable**: the average over ``stable`` seconds (60) decides;
- **panic**: when the average over ``panic`` seconds (6) asks for at least twice the
  replicas there are, the panic window decides and the count never goes down; panic
  ends once a whole stable window has passed without that;
- the answer stays within the predictor's ``minReplicas`` and ``maxReplicas`` (scale
  to zero, below one, is the caller's rule: no requests for the idle grace).
Pure: time arrives as ``now``; equal inputs give equal answers.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Final

#: The share of the target a replica is aimed at (Knative's target utilization).
UTILIZATION: Final = 0.7
STABLE_WINDOW: Final = 60.0
PANIC_WINDOW: Final = 6.0
#: Panic starts when the panic window asks for this many times the replicas there are.
PANIC_THRESHOLD: Final = 2.0


@dataclass(slots=True)
class Autoscaler:
    """One predictor's autoscaler (see the module docstring)."""

    target: float
    stable: float = STABLE_WINDOW
    panic: float = PANIC_WINDOW
    _samples: deque[tuple[float, float]] = field(default_factory=deque)
    _panic_since: float | None = None
    _panic_floor: int = 0

    def observe(self, now: float, demand: float) -> None:
        """Record the predictor's demand (requests in flight and held) at ``now``."""
        self._samples.append((now, demand))
        while self._samples and self._samples[0][0] < now - self.stable:
            self._samples.popleft()

    def desired(self, now: float, current: int, low: int, high: int) -> int:
        """Replicas wanted at ``now`` with ``current`` replicas, within ``low..high``."""
        per_replica = self.target * UTILIZATION
        stable = math.ceil(self._average(now, self.stable) / per_replica)
        panic = math.ceil(self._average(now, self.panic) / per_replica)
        if current > 0 and panic >= PANIC_THRESHOLD * current:
            if self._panic_since is None:
                self._panic_floor = current
            self._panic_since = now
        elif self._panic_since is not None and now - self._panic_since >= self.stable:
            self._panic_since = None
        if self._panic_since is not None:
            wanted = max(panic, self._panic_floor)
            self._panic_floor = wanted
        else:
            wanted = stable
        return max(low, min(high, wanted))

    def _average(self, now: float, window: float) -> float:
        values = [demand for at, demand in self._samples if at >= now - window]
        return sum(values) / len(values) if values else 0.0
