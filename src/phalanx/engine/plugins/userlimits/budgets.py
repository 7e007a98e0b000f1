"""Budgets: whether a user of a queue, or the queue as a whole, has spent what its
``Budget`` allows in the period holding the session's ``now``.

What was spent is ``snapshot.usage``'s: closed runs plus the tasks on nodes now, up to
``now`` (``engine.snapshot.usage.spent``). A budget is spent on a resource once what
was used of it reaches the budget; a job is over budget when it asks for a resource
that its user's or its queue's budget has spent (a CPU-only job still runs once the
GPU-hours are spent). Verdicts are taken once per session: within a session nothing
runs, so nothing more is spent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from phalanx.domain.queue import Budget
from phalanx.domain.resources import Resources, format_amount
from phalanx.engine.snapshot import EPSILON, JobInfo, QueueInfo, Snapshot, Vector
from phalanx.engine.snapshot.usage import HOUR, period_start, spent

UserKey = tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spent:
    """A budget found spent: which resources, and the sentence that says so (without the
    resource a job asks for: ``Budgets.over`` adds the fix)."""

    dims: Vector  # 1.0 where the budget is spent, else 0.0
    said: str
    field: str  # the document field of the budget spent (``budget.perUser``)


class Budgets:
    """One session's budget verdicts, per ``(queue, user)`` and per queue, found on first use."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot = snapshot
        self.now = now
        self._users: dict[UserKey, Spent | None] = {}
        self._queues: dict[str, Spent | None] = {}

    def over(self, job: JobInfo) -> str | None:
        """Why ``job`` is over budget (its user's or its queue's budget is spent on a
        resource it asks for), or None."""
        budget = job.queue.spec.budget
        if budget is None:
            return None
        asks = job.min_request() > 0
        for found in (self._user(job.queue, job.user, budget), self._queue(job.queue, budget)):
            if found is not None and bool((asks & (found.dims > 0)).any()):
                return (
                    f"over budget: {found.said}; {_when(self.now, budget)}; fix: wait for "
                    f"it, or ask an admin to raise {found.field}"
                )
        return None

    def _user(self, queue: QueueInfo, user: str, budget: Budget) -> Spent | None:
        key = (queue.name, user)
        if key not in self._users:
            self._users[key] = None
            if budget.per_user is not None:
                used = spent(self.snapshot, key, self.now, budget.period)
                self._users[key] = self._verdict(
                    used, budget.per_user, f"user {user} used", "budget.perUser", queue
                )
        return self._users[key]

    def _queue(self, queue: QueueInfo, budget: Budget) -> Spent | None:
        if queue.name not in self._queues:
            self._queues[queue.name] = None
            if budget.queue is not None:
                used = np.zeros(len(self.snapshot.dims))
                for key in _users_of(self.snapshot, queue.name):
                    used = used + spent(self.snapshot, key, self.now, budget.period)
                self._queues[queue.name] = self._verdict(
                    used, budget.queue, "its users used", "budget.queue", queue
                )
        return self._queues[queue.name]

    def _verdict(
        self, used: Vector, hours: Resources, who: str, field: str, queue: QueueInfo
    ) -> Spent | None:
        snapshot = self.snapshot
        allowed = snapshot.vector(hours, missing=np.inf) * HOUR
        dims = (used + EPSILON >= allowed) & np.isfinite(allowed)
        if not dims.any():
            return None
        d = int(np.flatnonzero(dims)[0])
        name = snapshot.dims[d]
        amount = float(used[d] / snapshot.unit[d] / HOUR)
        said = (
            f"{who} {_hours(name, amount)} in queue {queue.name} this period, its budget "
            f"({field}.{name} {format_amount(name, hours[name])})"
        )
        return Spent(dims=dims.astype(np.float64), said=said, field=field)


def _users_of(snapshot: Snapshot, queue: str) -> list[UserKey]:
    """Every ``(queue, user)`` of ``queue`` that holds or used anything, in a stable order."""
    keys = {key for key in snapshot.user_allocated if key[0] == queue}
    keys.update(key for key in snapshot.usage.users() if key[0] == queue)
    return sorted(keys)


def _hours(name: str, amount: float) -> str:
    """``100 gpu-hours``, ``12.5 cpu-hours``, ``512Gi memory-hours``."""
    return f"{format_amount(name, amount)} {name}-hours"


def _when(now: float, budget: Budget) -> str:
    end = period_start(now, budget.period) + budget.period
    return f"the budget restarts in {_duration(end - now)} (at t={end:g}s)"


def _duration(seconds: float) -> str:
    """``3d 4h``, ``5h 20m``, ``12m``, ``40s``: the two largest units."""
    seconds = max(math.ceil(seconds), 0)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])
