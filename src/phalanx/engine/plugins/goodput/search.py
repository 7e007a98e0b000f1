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


def search_typed(
    values: NDArray[np.float64], capacity: NDArray[np.int64], *, rounds: int = 4
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """GPUs and a GPU type per job over pools of several types: ``values[j, t, a]`` is
    job ``j``'s value of ``a`` GPUs of type ``t`` (``inf``: not allowed; ``values[j, :,
    0]`` alike; a job's current size and type are the caller's to favour in them),
    ``capacity[t]`` the GPUs of type ``t``. Returns (GPUs, type: -1 where 0 GPUs, each
    type's price from step 1), with a low ``sum(values[j, type_j, a_j])``, at most
    ``capacity[t]`` GPUs of each type.

    1. Types by prices (Lagrangian relaxation of the capacities): each type has a price
       per GPU; each job takes the (type, size) of least value plus price, and each
       type's price is the least (by bisection) at which its demand fits its capacity,
       the types in turn, ``PRICE_SWEEPS`` times over. A job thus goes where it gains
       most against what the others would gain there: a type wanted by many costs more.
    2. Per type, ``search`` among the jobs the prices put there (from those sizes: over
       the capacity it shrinks them, the GPU whose loss costs least first; then fills and
       improves).
    3. Fill: while some type has GPUs free, the job and type whose next 1..free GPUs
       gain most per GPU take them; a job with GPUs grows on its own type only, one
       without may take any type.
    4. Improve, per type: ``search``'s moves among that type's holders and the jobs
       without GPUs (a move to one of those gives it that type), then fill again; at
       most ``rounds`` passes over the types, fewer once no move helps.

    A job holding GPUs of a type keeps to it when its row allows no other (the plugin
    allows none). Deterministic (ties: the lower job, then the lower type)."""
    jobs, types, _ = values.shape
    alloc = np.zeros(jobs, dtype=np.int64)
    kind = np.full(jobs, -1, dtype=np.int64)
    if jobs == 0:
        return alloc, kind, np.zeros(types)
    with np.errstate(invalid="ignore"):
        priced_alloc, priced_kind, prices = _priced(values, capacity)
        for t in range(types):
            mine = np.flatnonzero(priced_kind == t)
            if len(mine):
                held = search(values[mine, t, :], priced_alloc[mine], int(capacity[t]))
                alloc[mine], kind[mine] = held, np.where(held > 0, t, -1)
        _fill_typed(values, alloc, kind, capacity)
        for _ in range(rounds):
            moved = False
            for t in range(types):
                open_ = np.isfinite(values[:, t, 1:]).any(axis=1)
                mine = np.flatnonzero((kind == t) | ((kind < 0) & open_))
                if len(mine) < 2:
                    continue
                sub = values[mine, t, :]
                part = alloc[mine].copy()
                if _improve(sub, part):
                    moved = True
                    _fill(sub, part, int(capacity[t]))
                    alloc[mine] = part
                    kind[mine] = np.where(part > 0, t, -1)
            if not moved:
                break
            _fill_typed(values, alloc, kind, capacity)
    return alloc, kind, prices


#: Passes over the types that set their prices (``search_typed``, step 1).
PRICE_SWEEPS = 4
#: Bisection steps per price.
PRICE_STEPS = 40


def _priced(
    values: NDArray[np.float64], capacity: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Each job's (size, type) at the prices that fit the capacities (see
    ``search_typed``, step 1; type -1 for a job given nothing), and the prices. Demand
    may still exceed a capacity where sizes are indivisible (step 2 shrinks it)."""
    jobs, types, width = values.shape
    sizes = np.arange(width, dtype=np.float64)
    finite = values[np.isfinite(values)]
    top = float(finite.max()) - float(finite.min()) + 1.0 if finite.size else 1.0
    prices = np.zeros(types)

    def choose(p: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        cost = values + p[None, :, None] * sizes[None, None, :]
        flat = np.argmin(cost.reshape(jobs, -1), axis=1)
        chosen_kind, chosen = np.divmod(flat, width)
        chosen_kind = np.where(chosen > 0, chosen_kind, -1)
        return chosen.astype(np.int64), chosen_kind.astype(np.int64)

    def demand(p: NDArray[np.float64], t: int) -> int:
        chosen, chosen_kind = choose(p)
        return int(chosen[chosen_kind == t].sum())

    for _ in range(PRICE_SWEEPS):
        changed = False
        for t in range(types):
            if demand(prices, t) <= capacity[t]:
                continue  # its price may only fall: kept, the sweep is monotone
            low, high = prices[t], top
            trial = prices.copy()
            for _ in range(PRICE_STEPS):
                trial[t] = (low + high) / 2
                if demand(trial, t) <= capacity[t]:
                    high = trial[t]
                else:
                    low = trial[t]
            prices[t] = high
            changed = True
        if not changed:
            break
    return (*choose(prices), prices)


def _fill_typed(
    values: NDArray[np.float64],
    alloc: NDArray[np.int64],
    kind: NDArray[np.int64],
    capacity: NDArray[np.int64],
) -> None:
    """Give free GPUs of every type where they gain most per GPU (see ``search_typed``)."""
    jobs, types, width = values.shape
    rows = np.arange(jobs)
    while True:
        used = np.bincount(kind[kind >= 0], weights=alloc[kind >= 0], minlength=types)
        free = capacity - used.astype(np.int64)
        most = int(free.max(initial=0))
        if most <= 0:
            return
        steps = np.arange(1, min(most, width - 1) + 1)
        to = alloc[:, None] + steps[None, :]  # (jobs, steps)
        here = values[rows, np.maximum(kind, 0), alloc]  # the value now (any type at 0)
        after = values[
            rows[:, None, None],
            np.arange(types)[None, :, None],
            np.minimum(to, width - 1)[:, None, :],
        ]
        gain = (here[:, None, None] - after) / steps[None, None, :]
        eligible = (kind[:, None] < 0) | (kind[:, None] == np.arange(types)[None, :])
        ok = (
            eligible[:, :, None]
            & (to < width)[:, None, :]
            & (steps[None, None, :] <= free[None, :, None])
            & np.isfinite(after)
        )
        gain = np.where(ok, gain, -np.inf)
        best = np.unravel_index(int(np.argmax(gain)), gain.shape)
        j, t, s = (int(b) for b in best)
        if not gain[best] > TOLERANCE * max(abs(float(here[j])), 1.0):
            return
        alloc[j] += int(steps[s])
        kind[j] = t
