"""What gateways in their own processes (``phalanx gateway``) report, as the serving
controller reads it: ``GatewayReports``.

Each such gateway rewrites its rows every second (``control.gateway_process``); rows not
rewritten for ``fresh`` seconds are from a gateway gone and count for nothing (and are
removed). ``refresh`` reads them once per serving pass; then, until the next:
- ``load`` is a predictor's demand summed over those gateways (the autoscaler adds it
  to the in-process gateway's);
- ``tally`` is a predictor's answers summed over them (a rollout adds it to the
  in-process gateway's tallies; a gateway that restarts or goes counts as no answers,
  never as negative ones);
- ``busy`` names the services one of them held a request for, or answered one of since
  the last refresh: what keeps a predictor at ``minReplicas: 0`` awake, or wakes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from phalanx.control.store import gateway_reports as stored
from phalanx.control.store.database import Database
from phalanx.gateway.tallies import LATENCY_BUCKETS, Tally

#: Seconds after which a report not rewritten is from a gateway gone.
FRESH: Final = 5.0
#: Seconds between two removals of stale reports (each pass only reads).
SWEEP_EVERY: Final = 60.0


class GatewayReports:
    """See the module docstring."""

    def __init__(
        self, db: Database, *, fresh: float = FRESH, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self._fresh = fresh
        self._clock = clock
        self._loads: dict[tuple[str, str], float] = {}
        self._tallies: dict[tuple[str, str], Tally] = {}
        self._requests: dict[tuple[str, str, str], int] = {}  # (gateway, service, predictor)
        self.busy: frozenset[str] = frozenset()
        self._swept = float("-inf")

    def refresh(self) -> None:
        """Read the fresh reports (one query); remove stale ones once a ``SWEEP_EVERY``."""
        now = self._clock()
        since = now - self._fresh
        if now - self._swept >= SWEEP_EVERY:  # rows of gateways gone, now and then
            self._swept = now
            with self.db.write() as session:
                stored.forget(session, before=since - self._fresh)
        with self.db.session() as session:
            rows = stored.fresh(session, since)
        loads: dict[tuple[str, str], float] = {}
        tallies: dict[tuple[str, str], Tally] = {}
        requests: dict[tuple[str, str, str], int] = {}
        busy: set[str] = set()
        for row in rows:
            key = (row.service, row.predictor)
            loads[key] = loads.get(key, 0.0) + row.demand
            buckets = tuple(row.buckets)
            if len(buckets) != len(LATENCY_BUCKETS) + 1:  # another version's buckets
                buckets = Tally().buckets
            tallies[key] = tallies.get(key, Tally()).plus(Tally(row.requests, row.errors, buckets))
            requests[(row.gateway, *key)] = row.requests
            if row.held or row.requests != self._requests.get((row.gateway, *key), row.requests):
                busy.add(row.service)
        self._loads, self._tallies, self._requests = loads, tallies, requests
        self.busy = frozenset(busy)

    def load(self, service: str, predictor: str) -> float:
        """The predictor's demand at the gateways in their own processes."""
        return self._loads.get((service, predictor), 0.0)

    def tally(self, service: str, predictor: str) -> Tally:
        """The predictor's answers at the gateways in their own processes."""
        return self._tallies.get((service, predictor), Tally())
