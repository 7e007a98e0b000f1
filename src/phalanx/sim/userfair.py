"""Fairness between users: Jain's index, per window, of GPU-time against each user's fair share.

The definition (as in the fair-share literature: Gandiva_fair's equal user shares,
Themis' and DRF's max-min fairness) is meant to stay meaningful when users submit very
different amounts of work:

- A user's *demand* at an instant is the GPUs they could use then: the gang GPUs of
  their jobs submitted and not yet ended (waiting or running), or the GPUs they hold
  if more. A user is *active* in a window when their demand there is above zero.
- A user's *fair share* at an instant is their max-min fair share of the cluster's
  GPUs among the users demanding then (water-filling: each gets an equal split, a user
  demanding less than that gets their demand and the rest is split among the others).
  With every user demanding more than an equal split this is Gandiva_fair's
  1/n-per-active-user share; a light user is never counted as short-changed for
  GPUs they did not ask for.
- Per window (fixed length, default one day of simulated time, from the first
  submission): x_i = GPU-time user i received in the window / the integral of their
  fair share over it, for the active users only. Jain's index over them,
  J = (sum x)^2 / (n * sum x^2), lies in [1/n, 1]: 1 when every active user got the
  same fraction of their fair share (all of it under a fair, work-conserving
  scheduler, or the same part of it when packing leaves GPUs idle), 1/n when one user
  took everything while n were demanding. A window with fewer than two active users
  says nothing about fairness and is not counted; one where no active user received
  anything (all equally stalled) counts as 1.

Guarantees: pure functions of their inputs (no clock, no randomness), so the same run
gives the same figures; memory stays bounded (instants are handled in blocks) whatever
the number of events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

#: Default window length: one day of simulated time.
DAY: Final = 86_400.0
#: Demand below this (GPU-seconds in a window) is no demand: float noise, not a user.
_EPS: Final = 1e-9
#: Cells (instants x users) handled at once, to bound memory on long traces.
_BLOCK_CELLS: Final = 1 << 21

#: The summary figures of fairness between users, in the order tables show them.
USER_FIGURES: Final = (
    "users",
    "user_jain_mean",
    "user_jain_min",
    "user_worst_avg_wait_s",
    "user_max_wait_s",
    "user_wait_max_over_mean",
)

Floats = npt.NDArray[np.float64]
#: A step function: (time, value) points, sorted by time; value holds until the next
#: point; zero before the first.
Points = Sequence[tuple[float, float]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """One window's fairness: its active users, in name order, with what they received
    and their fair share (both GPU-seconds), and Jain's index over received/fair."""

    start: float
    end: float
    users: tuple[str, ...]
    received: tuple[float, ...]
    fair: tuple[float, ...]
    index: float


def jain(values: Sequence[float] | Floats) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2) of non-negative ``values``: 1 for
    equal values (all zero included), 1/n when one value holds everything; 1 when empty."""
    x = np.asarray(values, dtype=float)
    square = float((x**2).sum())
    if x.size == 0 or square <= 0.0:
        return 1.0
    return float(x.sum() ** 2 / (x.size * square))


def water_fill(demand: Floats, capacity: float) -> Floats:
    """Max-min fair shares of ``capacity`` for each row of ``demand`` (instants x users):
    no share above its demand, the shares sum to min(capacity, row's total demand), and
    whatever one user does not need is split equally among those who need more."""
    fair = demand.copy()
    short = np.flatnonzero(demand.sum(axis=1) > capacity)  # only these need sharing out
    if short.size and demand.shape[1]:
        fair[short] = _share(demand[short], capacity)
    return fair


def _share(demand: Floats, capacity: float) -> Floats:
    """``water_fill`` of rows whose demand exceeds ``capacity``."""
    rows, users = demand.shape
    ordered = np.sort(demand, axis=1)
    before = np.cumsum(ordered, axis=1) - ordered  # demand of the lighter users
    remaining = np.arange(users, 0, -1, dtype=float)  # users not yet capped, lightest first
    level = (capacity - before) / remaining  # equal split of what the lighter ones left
    capped = ordered <= level  # the k-th lightest is fully served at its split
    # The first user not fully served sets the level for all heavier ones.
    first = np.where(capped.all(axis=1), users - 1, np.argmin(capped, axis=1))
    cut = level[np.arange(rows), first]
    cut = np.where(capped.all(axis=1), np.inf, cut)
    return np.minimum(demand, cut[:, None])


def windows(
    demand: Mapping[str, Points],
    held: Mapping[str, Points],
    *,
    capacity: float,
    start: float,
    end: float,
    window: float = DAY,
) -> list[Window]:
    """The fairness of each window of ``window`` seconds from ``start`` to ``end``.

    ``demand`` is each user's gang GPUs of unfinished jobs over time, ``held`` the GPUs
    each holds (as ``Points``); ``capacity`` the cluster's GPUs. Every window that
    overlaps [start, end) is returned, the last one cut at ``end``; each names only its
    active users. Raises ``ValueError`` for a window that is not positive.
    """
    if window <= 0:
        raise ValueError(f"a fairness window must be positive, got {window}")
    users = sorted(set(demand) | set(held))
    if end <= start or not users:
        return []
    count = max(1, int(np.ceil((end - start) / window)))
    bounds = np.minimum(start + window * np.arange(count + 1), end)
    held_steps, demand_steps = _steps(held, users), _steps(demand, users)
    times = _instants([*held_steps, *demand_steps], bounds)
    spans = np.diff(times)
    which = np.minimum(((times[:-1] - start) // window).astype(int), count - 1)
    got = np.zeros((count, len(users)))
    fair = np.zeros((count, len(users)))
    wanted = np.zeros((count, len(users)))
    block = max(1, _BLOCK_CELLS // len(users))
    for lo in range(0, spans.size, block):
        at = times[lo : min(lo + block, spans.size)]
        have = _at(held_steps, at)
        need = np.maximum(_at(demand_steps, at), have)
        dt = spans[lo : lo + at.size, None]
        rows = which[lo : lo + at.size]
        np.add.at(got, rows, have * dt)
        np.add.at(fair, rows, water_fill(need, capacity) * dt)
        np.add.at(wanted, rows, need * dt)
    return [
        _window(float(bounds[w]), float(bounds[w + 1]), users, got[w], fair[w], wanted[w])
        for w in range(count)
    ]


def summary(found: Sequence[Window]) -> dict[str, float | int | None]:
    """Mean and minimum of the index over windows with two or more active users (None
    when there is none), and how many windows that is."""
    counted = [w.index for w in found if len(w.users) >= 2]
    return {
        "user_jain_mean": round(float(np.mean(counted)), 6) if counted else None,
        "user_jain_min": round(min(counted), 6) if counted else None,
        "user_jain_windows": len(counted),
    }


def user_figures(
    per_user: Mapping[str, Mapping[str, float | int]],
    found: Sequence[Window],
    *,
    window: float = DAY,
) -> dict[str, object]:
    """The ``USER_FIGURES`` (and the window and how many windows counted) of a run whose
    per-user rows (``avg_wait_s``, ``starvation_s``: a user's mean and longest wait,
    never-started jobs waiting until the run's end) are ``per_user`` and whose
    windows are ``found``.

    - ``user_jain_mean`` / ``user_jain_min``: mean and lowest Jain's index over the
      windows with two or more active users;
    - ``user_worst_avg_wait_s``: the mean wait of the worst-off user (``user_worst``);
    - ``user_max_wait_s``: the longest any user's job waited;
    - ``user_wait_max_over_mean``: that worst mean wait over the mean of all users'
      mean waits: 1 when every user waits the same on average, up to n (users) when
      one user does all the waiting; 1 when nobody waits.

    With fewer than two users every figure but ``users`` and ``user_window_s`` is None:
    a single user's "fairness" would read as perfect and mean nothing.
    """
    figures: dict[str, object] = {"users": len(per_user), "user_window_s": window}
    if len(per_user) < 2:
        return {**figures, **dict.fromkeys((*USER_FIGURES[1:], "user_jain_windows", "user_worst"))}
    waits = {user: float(row.get("avg_wait_s", 0.0)) for user, row in sorted(per_user.items())}
    worst = max(waits, key=lambda user: (waits[user], user))
    mean = float(np.mean(list(waits.values())))
    return {
        **figures,
        **summary(found),
        "user_worst": worst,
        "user_worst_avg_wait_s": round(waits[worst], 3),
        "user_max_wait_s": round(
            max(float(r.get("starvation_s", 0.0)) for r in per_user.values()), 3
        ),
        "user_wait_max_over_mean": round(waits[worst] / mean, 6) if mean > 0 else 1.0,
    }


def _window(
    start: float, end: float, users: Sequence[str], got: Floats, fair: Floats, wanted: Floats
) -> Window:
    active = [i for i in range(len(users)) if wanted[i] > _EPS and fair[i] > _EPS]
    x = [got[i] / fair[i] for i in active]
    return Window(
        start=start,
        end=end,
        users=tuple(users[i] for i in active),
        received=tuple(round(float(got[i]), 3) for i in active),
        fair=tuple(round(float(fair[i]), 3) for i in active),
        index=jain(x),
    )


def _instants(steps: Sequence[tuple[Floats, Floats]], bounds: Floats) -> Floats:
    """Every instant at which some step function changes, plus the window bounds, within
    the bounds: each span between two consecutive ones is constant for everyone."""
    merged: Floats = np.unique(np.concatenate([bounds, *(at for at, _ in steps)]))
    inside: Floats = merged[(merged >= bounds[0]) & (merged <= bounds[-1])]
    return inside


def _steps(series: Mapping[str, Points], users: Sequence[str]) -> list[tuple[Floats, Floats]]:
    """Each user's step function as (times, values) arrays, in ``users`` order."""
    found = []
    for user in users:
        points = series.get(user, ())
        found.append((
            np.fromiter((t for t, _ in points), dtype=float, count=len(points)),
            np.fromiter((v for _, v in points), dtype=float, count=len(points)),
        ))  # fmt: skip
    return found


def _at(steps: Sequence[tuple[Floats, Floats]], times: Floats) -> Floats:
    """Each step function's value (columns) at each of ``times`` (rows)."""
    out = np.zeros((times.size, len(steps)))
    for j, (at, values) in enumerate(steps):
        if at.size:
            index = np.searchsorted(at, times, side="right") - 1
            out[:, j] = np.where(index >= 0, values[np.maximum(index, 0)], 0.0)
    return out
