"""What each user of each queue has used of the cluster: the memory that fair-share and
budgets read.

Usage is counted in resource-seconds per dimension, in the snapshot's engine units (a
task of 2 GPUs on its node for an hour used 7,200 GPU-seconds, which the row holds as
7,200,000 thousandths of a GPU-second: ``Snapshot.vector`` converts), from the time a task is placed
on a node (bound) to the time it leaves it, as the drivers say through
``ClusterState.set_task``. A run is banked here when its task leaves its node; the
tasks on nodes now are read from the snapshot (``TaskInfo.start_time``), so every
answer below counts both, up to the session's ``now``.

Two views of one history, keyed by ``(queue, user)``:

- ``decayed``: every second of use weighted by ``2 ** (-(now - t) / half_life)``,
  integrated exactly over each run (Slurm's ``PriorityDecayHalfLife``): what a
  fair-share priority remembers. Use a half-life ago counts half.
- ``spent``: resource-seconds used within the budget period that holds ``now``. Periods
  are whole hours long and aligned to ``t = 0`` (so a day's period starts at UTC
  midnight on the control plane's clock). Closed runs are kept split at hour
  boundaries for ``KEEP_HOURS`` (the longest period a budget may have), which makes
  every period's sum exact.

The book belongs to the cluster's state, not to a cycle (see ``framework.kept``): a
driver that builds a new ``ClusterState`` (new queues) hands the old book over, and the
control plane banks the runs of its accounting ledger into a fresh one at start.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np

from phalanx.engine.snapshot.tasks import ON_NODE, TaskInfo
from phalanx.engine.snapshot.units import Vector

if TYPE_CHECKING:
    from phalanx.engine.snapshot.cluster import Snapshot

#: A user of a queue: (queue name, user name).
UserKey = tuple[str, str]

HOUR: Final = 3600.0
#: Slurm's default ``PriorityDecayHalfLife``: 7 days.
DEFAULT_HALF_LIFE: Final = 7 * 86400.0
#: How long closed runs are kept by the hour for budgets: 31 days, the longest period.
KEEP_HOURS: Final = 31 * 24


def period_start(now: float, period: float) -> float:
    """The start of the budget period (``period`` seconds, aligned to t = 0) holding ``now``."""
    return math.floor(now / period) * period


def decay_integral(start: float, end: float, now: float, half_life: float) -> float:
    """``∫ 2 ** (-(now - t) / half_life) dt`` over ``[start, end]`` (``end <= now``): the
    decayed weight at ``now`` of one unit of use held from ``start`` to ``end``."""
    if end <= start:
        return 0.0
    scale = half_life / math.log(2)
    later, earlier = 2.0 ** (-(now - end) / half_life), 2.0 ** (-(now - start) / half_life)
    return float(scale * (later - earlier))


class UsageBook:
    """Closed runs of every ``(queue, user)``: decayed at ``half_life``, and by the hour
    for the last ``KEEP_HOURS`` hours. Banking order does not matter as long as each
    bank's ``end`` is at most the time of any later read."""

    def __init__(self, dims: Sequence[str], *, half_life: float = DEFAULT_HALF_LIFE) -> None:
        if not half_life > 0:
            raise ValueError(f"half_life must be positive, not {half_life}")
        self.dims = tuple(dims)
        self.half_life = half_life
        self._decayed: dict[UserKey, tuple[Vector, float]] = {}  # (value, as of)
        self._hours: dict[UserKey, dict[int, Vector]] = {}
        self._latest_hour = 0

    def moved(self, dims: Sequence[str]) -> UsageBook:
        """This book over resource dimensions ``dims`` (itself when they are its own): a
        resource it has that ``dims`` lacks is dropped, one it lacks counts from zero."""
        dims = tuple(dims)
        if dims == self.dims:
            return self
        where = [self.dims.index(d) if d in self.dims else -1 for d in dims]

        def move(row: Vector) -> Vector:
            return np.array([row[i] if i >= 0 else 0.0 for i in where])

        book = UsageBook(dims, half_life=self.half_life)
        book._decayed = {k: (move(v), at) for k, (v, at) in self._decayed.items()}
        book._hours = {
            k: {h: move(v) for h, v in hours.items()} for k, hours in self._hours.items()
        }
        book._latest_hour = self._latest_hour
        return book

    def users(self) -> Iterator[UserKey]:
        """Every ``(queue, user)`` with banked use, in a stable order."""
        return iter(sorted(self._decayed))

    def bank(self, key: UserKey, rate: Vector, start: float, end: float) -> None:
        """Bank a closed run: ``rate`` (resources held) from ``start`` to ``end``."""
        if end <= start or not rate.any():
            return
        value, as_of = self._decayed.get(key, (np.zeros(len(self.dims)), end))
        at = max(as_of, end)
        grown = value * 2.0 ** (-(at - as_of) / self.half_life)
        grown = grown + rate * decay_integral(start, end, at, self.half_life)
        self._decayed[key] = (grown, at)
        hours = self._hours.setdefault(key, {})
        first, last = math.floor(start / HOUR), math.floor(end / HOUR)
        for hour in range(max(first, last - KEEP_HOURS), last + 1):
            seconds = min(end, (hour + 1) * HOUR) - max(start, hour * HOUR)
            if seconds > 0:
                hours[hour] = hours.get(hour, 0.0) + rate * seconds
        if last > self._latest_hour:
            self._latest_hour = last
            self._forget_before(last - KEEP_HOURS)

    def _forget_before(self, hour: int) -> None:
        for hours in self._hours.values():
            for old in [h for h in hours if h < hour]:
                del hours[old]

    def decayed(self, key: UserKey, now: float) -> Vector:
        """The decayed use of ``key``'s closed runs at ``now``."""
        found = self._decayed.get(key)
        if found is None:
            return np.zeros(len(self.dims))
        value, as_of = found
        faded: Vector = value * 2.0 ** (-(now - as_of) / self.half_life)
        return faded

    def spent(self, key: UserKey, since: float) -> Vector:
        """Resource-seconds of ``key``'s closed runs from ``since`` (a whole hour) on."""
        first = math.floor(since / HOUR)
        total = np.zeros(len(self.dims))
        for hour, used in self._hours.get(key, {}).items():
            if hour >= first:
                total += used
        return total


def _on_nodes(snapshot: Snapshot, queue: str | None = None) -> Iterator[tuple[UserKey, TaskInfo]]:
    """Every task on a node now with a start time, with its ``(queue, user)``."""
    for job in snapshot.jobs.values():
        if (queue is not None and job.queue.name != queue) or not any(
            job.counts[status] for status in ON_NODE
        ):
            continue
        key = (job.queue.name, job.user)
        for task in job.tasks:
            if task.status in ON_NODE and task.start_time is not None:
                yield key, task


def decayed_usage(snapshot: Snapshot, now: float) -> dict[UserKey, Vector]:
    """Every ``(queue, user)``'s decayed use at ``now``: closed runs and the tasks on
    nodes now (keys without either are absent)."""
    book = snapshot.usage
    found = {key: book.decayed(key, now) for key in book.users()}
    for key, task in _on_nodes(snapshot):
        assert task.start_time is not None
        held = task.request * decay_integral(task.start_time, now, now, book.half_life)
        found[key] = found[key] + held if key in found else held
    return found


def spent(snapshot: Snapshot, key: UserKey, now: float, period: float) -> Vector:
    """Resource-seconds ``key`` used in the budget period holding ``now`` (``period``
    seconds, a whole number of hours, at most ``KEEP_HOURS``): closed runs and the tasks
    on nodes now."""
    since = period_start(now, period)
    total = snapshot.usage.spent(key, since)
    for held, task in _on_nodes(snapshot, key[0]):
        if held == key:
            assert task.start_time is not None
            total = total + task.request * max(now - max(task.start_time, since), 0.0)
    return total
