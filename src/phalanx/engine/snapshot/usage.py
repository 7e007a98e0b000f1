"""What each user of each queue has used of the cluster: the memory that fair-share and
budgets read.

Usage is counted in resource-seconds per dimension, in the snapshot's engine units (a
task of 2 GPUs on its node for an hour used 7,200 GPU-seconds, which the row holds as
7,200,000 thousandths of a GPU-second: ``Snapshot.vector`` converts), from the time a task is placed
on a node (bound) to the time it leaves it, as the drivers say through
``ClusterState.set_task``. A run is banked here when its task leaves its node; the
tasks on nodes now are held here too (``hold``/``release``, by the snapshot as tasks
with a start time come and go), as two sums per user from which their decayed use at
any ``now`` follows in constant time, so every answer below counts both, up to the
session's ``now``, at a cost that does not grow with the tasks running.

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
driver that builds a new ``ClusterState`` (new queues) hands the old book's closed runs
over (``carried``; the new state holds its tasks again as it takes its jobs in), and the
control plane banks the runs of its accounting ledger into a fresh one at start. Sums
of held tasks are kept in floating point: their decayed use is exact to about 1e-10 of
itself (less in the first second of a task, read as none), and a fair-share reading
them rounds its answer to six places, so that the order tasks came and went in cannot
tip a decision but at a hair's breadth from a rounding step.
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
#: Half-lives past the origin of held sums after which they are measured from a new one
#: (so the weights, powers of two, stay far from overflow).
REBASE_AFTER: Final = 64.0
#: The share of held tasks' resources below which their decayed use reads as none.
HELD_NOISE: Final = 1e-9


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
        #: per user with tasks on nodes: how many, the sum of what they hold, and that
        #: sum weighted by ``2 ** ((start - origin) / half_life)``
        self._held: dict[UserKey, tuple[int, Vector, Vector]] = {}
        self._origin: float | None = None

    def carried(self, dims: Sequence[str]) -> UsageBook:
        """A new book over resource dimensions ``dims`` with this one's closed runs and no
        held task: a resource it has that ``dims`` lacks is dropped, one it lacks counts
        from zero."""
        dims = tuple(dims)
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

    def hold(self, key: UserKey, rate: Vector, start: float) -> None:
        """A task of ``key`` holds ``rate`` on a node since ``start``."""
        if self._origin is None:
            self._origin = start
        elif (start - self._origin) / self.half_life > REBASE_AFTER:
            self._rebase(start)
        zero = np.zeros(len(self.dims))
        count, total, weighted = self._held.get(key, (0, zero, zero))
        grown = rate * 2.0 ** ((start - self._origin) / self.half_life)
        self._held[key] = (count + 1, total + rate, weighted + grown)

    def release(self, key: UserKey, rate: Vector, start: float) -> None:
        """The task ``hold`` was told of (same ``rate`` and ``start``) left its node."""
        count, total, weighted = self._held[key]
        if count == 1:
            del self._held[key]
            return
        assert self._origin is not None
        shrunk = weighted - rate * 2.0 ** ((start - self._origin) / self.half_life)
        self._held[key] = (count - 1, total - rate, shrunk)

    def _rebase(self, origin: float) -> None:
        assert self._origin is not None
        factor = 2.0 ** ((self._origin - origin) / self.half_life)
        self._held = {
            k: (n, total, weighted * factor) for k, (n, total, weighted) in self._held.items()
        }
        self._origin = origin

    def held_decayed(self, key: UserKey, now: float) -> Vector:
        """The decayed use at ``now`` of ``key``'s tasks on nodes since they started."""
        found = self._held.get(key)
        if found is None or self._origin is None:
            return np.zeros(len(self.dims))
        _, total, weighted = found
        fade = 2.0 ** (-(now - self._origin) / self.half_life)
        # total - weighted * fade cancels for tasks that just started: what is left below
        # HELD_NOISE of the total is rounding, not use
        held: Vector = total - weighted * fade
        kept: Vector = np.where(held > total * HELD_NOISE, held, 0.0)
        return kept * (self.half_life / math.log(2))

    def users(self) -> Iterator[UserKey]:
        """Every ``(queue, user)`` with banked use or a task on a node, in a stable order."""
        return iter(sorted(self._decayed.keys() | self._held.keys()))

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
    return {key: book.decayed(key, now) + book.held_decayed(key, now) for key in book.users()}


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


def hold_task(book: UsageBook, task: TaskInfo) -> None:
    """Hold ``task`` in ``book`` if it is on a node with a start time."""
    if task.start_time is not None and task.status in ON_NODE:
        job = task.job
        book.hold((job.queue.name, job.user), task.request, task.start_time)


def release_task(book: UsageBook, task: TaskInfo) -> None:
    """Release ``task`` from ``book`` if it is on a node with a start time (as it was
    when ``hold_task`` was told of it: callers release before they change either)."""
    if task.start_time is not None and task.status in ON_NODE:
        job = task.job
        book.release((job.queue.name, job.user), task.request, task.start_time)
