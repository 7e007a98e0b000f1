"""Where the gateway sends a service's requests: ``Routes``.

Guarantees:
- ``replace`` swaps the whole table at once (from any thread); a request choosing a
  replica sees the old table or the new one, never a mix;
- ``acquire`` picks a predictor of the service at random by its traffic weight among
  those with a Ready replica that has a free slot (its ``concurrency``; 0: no limit),
  then that predictor's replica with the fewest requests in flight (ties: by name), and
  counts the request against it until ``release``; counts are exact under concurrency and
  stay right when the table is replaced while requests are in flight (a replica that
  left the table keeps its count until its last request is released);
- ``demand`` is a predictor's requests in flight plus its traffic share of those
  held at the gateway (``holding``), what the autoscaler reads;
- ``changed`` wakes every coroutine waiting in ``wait`` (on any event loop) when the
  table is replaced or a slot is released, so a held request looks again at once; a
  change between a waiter's look (``version``) and its ``wait`` is not missed.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Replica:
    """A Ready replica: its name (its job's), the URL it serves at, its predictor."""

    name: str
    url: str
    predictor: str


@dataclass(frozen=True, slots=True)
class Predictor:
    """A predictor: its traffic ``weight`` (percent), its Ready replicas, and how many
    requests one replica is sent at once (``concurrency``; 0: no limit)."""

    name: str
    weight: int
    replicas: tuple[Replica, ...]
    concurrency: int = 0


@dataclass(frozen=True, slots=True)
class Service:
    """A service's routes; ``waking``: replicas are on their way (starting, or the
    service scales from zero), so a request finding none Ready is held, not refused."""

    name: str
    predictors: tuple[Predictor, ...]
    waking: bool = False


class Routes:
    """The gateway's table of services (see the module docstring). ``rng`` draws the
    predictors (seed it for a reproducible sequence)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._services: dict[str, Service] = {}
        self._in_flight: dict[str, int] = {}  # replica name -> requests in flight
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._version = 0  # counts changes, so that a waiter misses none
        self._held: dict[str, int] = {}  # service -> requests waiting for a replica

    def replace(self, services: Mapping[str, Service]) -> None:
        """Make ``services`` the table (any thread)."""
        with self._lock:
            self._services = dict(services)
        self.changed()

    def service(self, name: str) -> Service | None:
        """Service ``name``'s routes, or None when the table has no such service."""
        return self._services.get(name)

    def acquire(self, name: str, exclude: Iterable[str] = ()) -> Replica | None:
        """A replica of service ``name`` for one request (not among ``exclude``), counted
        until ``release``; None when no predictor has a free Ready one."""
        skipped = set(exclude)
        with self._lock:
            service = self._services.get(name)
            if service is None:
                return None
            candidates: list[tuple[Predictor, list[Replica]]] = []
            for predictor in service.predictors:
                free = [
                    r
                    for r in predictor.replicas
                    if r.name not in skipped
                    and (
                        predictor.concurrency == 0
                        or self._in_flight.get(r.name, 0) < predictor.concurrency
                    )
                ]
                if free and predictor.weight > 0:
                    candidates.append((predictor, free))
            if not candidates:
                return None
            if len(candidates) == 1:
                _, free = candidates[0]
            else:
                weights = [p.weight for p, _ in candidates]
                _, free = self._rng.choices(candidates, weights=weights)[0]
            chosen = min(free, key=lambda r: (self._in_flight.get(r.name, 0), r.name))
            self._in_flight[chosen.name] = self._in_flight.get(chosen.name, 0) + 1
            return chosen

    def release(self, replica: Replica) -> None:
        """One request to ``replica`` ended: its slot is free again. Call it exactly once
        per ``acquire`` that returned ``replica`` (a count never goes below zero)."""
        with self._lock:
            left = self._in_flight.get(replica.name, 0) - 1
            if left > 0:
                self._in_flight[replica.name] = left
            else:
                self._in_flight.pop(replica.name, None)
        self.changed()

    def in_flight(self, name: str) -> dict[str, int]:
        """Requests in flight to each Ready replica of service ``name``, by replica (their
        total: ``sum(...values())``; a replica that left the table is not listed, though
        its requests still count against it until released)."""
        with self._lock:
            service = self._services.get(name)
            if service is None:
                return {}
            return {
                r.name: self._in_flight.get(r.name, 0)
                for p in service.predictors
                for r in p.replicas
            }

    def in_flight_rows(self) -> list[tuple[str, str, str, int]]:
        """``(service, predictor, replica, requests in flight)`` for every Ready replica
        in the table, in table order: one consistent reading, for a metrics scrape."""
        with self._lock:
            return [
                (s.name, p.name, r.name, self._in_flight.get(r.name, 0))
                for s in self._services.values()
                for p in s.predictors
                for r in p.replicas
            ]

    def held(self) -> dict[str, int]:
        """Requests waiting at the gateway for a replica, by service (none: absent)."""
        with self._lock:
            return dict(self._held)

    def holding(self, name: str, change: int) -> None:
        """``change`` requests of service ``name`` began (+) or stopped (-) waiting for a
        replica at the gateway."""
        with self._lock:
            left = self._held.get(name, 0) + change
            if left > 0:
                self._held[name] = left
            else:
                self._held.pop(name, None)

    def demand(self, name: str, predictor: str) -> float:
        """Predictor ``predictor`` of service ``name``'s demand: requests in flight at its
        replicas, and its traffic share of those waiting for one."""
        with self._lock:
            service = self._services.get(name)
            if service is None:
                return 0.0
            total = sum(p.weight for p in service.predictors) or 1
            found = 0.0
            for p in service.predictors:
                if p.name == predictor:
                    found += sum(self._in_flight.get(r.name, 0) for r in p.replicas)
                    found += self._held.get(name, 0) * p.weight / total
            return found

    @property
    def version(self) -> int:
        """How many changes there have been (read it before ``acquire``, give it to
        ``wait``)."""
        return self._version

    def changed(self) -> None:
        """Wake every waiter (any thread)."""
        with self._lock:
            self._version += 1
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    async def wait(self, since: int, timeout: float) -> None:
        """Return once there was a change after ``version`` was ``since`` (a table
        replaced, a slot released), or after ``timeout``."""
        event = asyncio.Event()
        with self._lock:
            if self._version != since:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[1] is not event]
