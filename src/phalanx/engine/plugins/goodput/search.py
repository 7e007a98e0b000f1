"""The allocation of GPUs to elastic jobs that maximises the cluster's goodput, Pollux's
way: the power mean with p = -1 of the jobs' speedups (OSDI '21, section 4.2), which
rewards total goodput but punishes any job left with little (a job with nothing weighs
1 / ``EPS``). Maximising it is minimising ``sum_j 1 / (s_j(a_j) + EPS)``.

Each job comes as a row of ``values``: ``values[j, a]`` = ``1 / (s_j(a) + EPS)`` for
``a`` GPUs, already penalised for a change from its current size (see the plugin) and
``inf`` where ``a`` is not allowed. ``search`` then:

1. starts from the current sizes (clamped into what is allowed), and while they hold
   more GPUs than ``capacity`` takes back the GPU whose loss costs least;
2. fills: while GPUs are free, gives the job with the best gain per GPU the number of
   GPUs (1 up to what is free) that earns it (steps of several GPUs get past the
   penalty of changing size);
3. improves: moves up to ``MAX_MOVE`` GPUs from one job to another while that lowers
   the sum, best move first, at most ``max_moves`` times.

Pollux searches with a genetic algorithm over whole placements (100 x 100 generations);
this searches sizes only (placement is allocate's business) and is exact for concave
speedups without penalties; it takes about a millisecond for tens of jobs. Ties go to
the job listed first (the session's job order). Deterministic.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Added to every speedup in the power mean (Pollux's).
EPS = 1e-3
#: The most GPUs one improving move shifts between two jobs.
MAX_MOVE = 16
#: A change must lower the objective by more than this (relative) to be made.
TOLERANCE = 1e-9


def search(
    values: NDArray[np.float64],
    current: NDArray[np.int64],
    capacity: int,
    *,
    max_moves: int | None = None,
) -> NDArray[np.int64]:
    """GPUs per job (one per row of ``values``, at most ``values.shape[1] - 1`` each)
    with a low ``sum(values[j, a_j])`` and ``sum(a) <= capacity``; every job's entry is
    finite (allowed) whenever its row has a finite entry at or below ``capacity``
    minus what the others must hold."""
    jobs, width = values.shape
    if jobs == 0:
        return np.zeros(0, dtype=np.int64)
    top = width - 1
    allowed = np.isfinite(values)
    sizes = np.arange(width)
    least = np.where(allowed, sizes, width).min(axis=1)
    alloc = np.clip(current.astype(np.int64), 0, top)
    for j in range(jobs):  # the current size if allowed, else the nearest allowed one
        if not allowed[j, alloc[j]]:
            ok = np.flatnonzero(allowed[j])
            alloc[j] = ok[np.argmin(np.abs(ok - alloc[j]))] if len(ok) else 0
    rows = np.arange(jobs)
    while alloc.sum() > capacity:
        cost = np.full(jobs, np.inf)
        lower = np.maximum(alloc - 1, 0)
        can = (alloc > least) & allowed[rows, lower]
        cost[can] = values[rows[can], lower[can]] - values[rows[can], alloc[can]]
        if not np.isfinite(cost).any():
            break
        alloc[int(np.argmin(cost))] -= 1
    with np.errstate(invalid="ignore"):  # inf - inf where sizes are not allowed
        _fill(values, alloc, capacity)
        moves = max_moves if max_moves is not None else 2 * jobs
        for _ in range(moves):
            if not _improve(values, alloc):
                break
            _fill(values, alloc, capacity)
    return alloc


def _fill(values: NDArray[np.float64], alloc: NDArray[np.int64], capacity: int) -> None:
    """Give free GPUs where they gain most per GPU, while any gain is left."""
    jobs, width = values.shape
    rows = np.arange(jobs)
    while (free := capacity - int(alloc.sum())) > 0:
        steps = np.arange(1, min(free, width - 1) + 1)
        to = alloc[:, None] + steps[None, :]
        inside = to < width
        after = values[rows[:, None], np.minimum(to, width - 1)]
        gain = (values[rows, alloc][:, None] - after) / steps[None, :]
        gain = np.where(inside & np.isfinite(after), gain, -np.inf)
        best = np.unravel_index(int(np.argmax(gain)), gain.shape)
        now = values[best[0], alloc[best[0]]]
        if not gain[best] > TOLERANCE * max(abs(float(now)), 1.0):
            return
        alloc[best[0]] += int(steps[best[1]])


def _improve(values: NDArray[np.float64], alloc: NDArray[np.int64]) -> bool:
    """Make the best move of 1..``MAX_MOVE`` GPUs from one job to another; True if one
    lowered the objective."""
    jobs, width = values.shape
    if jobs < 2:
        return False
    rows = np.arange(jobs)
    steps = np.arange(1, MAX_MOVE + 1)
    here = values[rows, alloc]
    down = alloc[:, None] - steps[None, :]
    loss = values[rows[:, None], np.maximum(down, 0)] - here[:, None]
    loss = np.where((down >= 0) & np.isfinite(loss), loss, np.inf)
    up = alloc[:, None] + steps[None, :]
    gain = values[rows[:, None], np.minimum(up, width - 1)] - here[:, None]
    gain = np.where((up < width) & np.isfinite(gain), gain, np.inf)
    delta = loss[:, None, :] + gain[None, :, :]  # from i, to j, by steps[d]
    delta[rows, rows, :] = np.inf
    flat = int(np.argmin(delta))
    i, j, d = np.unravel_index(flat, delta.shape)
    total = float(np.sum(here))
    if not delta[i, j, d] < -TOLERANCE * max(abs(total), 1.0):
        return False
    alloc[i] -= int(steps[d])
    alloc[j] += int(steps[d])
    return True
