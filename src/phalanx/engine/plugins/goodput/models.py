"""A job's speedup curve, learnt from what it reports (``Job.progress``), as Pollux's
scheduler learns it from its agents.

- Throughput: ``PerfParams`` fitted (``engine.goodput.fit_perf_params``, Pollux's single
  start) to the job's step timings, one per configuration it ran: the first timing
  reported for each (nodes, replicas, local batch), as Pollux's agent keeps them (the
  local batches tell the compute time's growth with the batch apart from the
  synchronisation's cost), from every start of gamma when that one start fails
  (``REFIT_ABOVE``). A fit is a pure function of those rows; ``Fits`` (kept
  across sessions) remembers fits by their rows, so a job is refitted only when it has
  run a new configuration (some 30 ms a fit).
- Statistical efficiency: the job's gradient statistics (``grad_sqr``, ``grad_var``) at
  its ``init_batch_size``.
- Speedup at ``n`` GPUs: the best goodput on ``n`` GPUs packed ``per_node`` to a node,
  over all batch configurations within the job's bounds, divided by the goodput of its
  fair share (Pollux normalises to the fair share too). Before a job has reported all
  of that, its speedup is linear: ``n / fair`` (Pollux's rule for a job with no model).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.progress import Progress, StepTiming
from phalanx.engine.goodput import (
    GAMMA_STARTS,
    BatchLimits,
    GoodputModel,
    GradParams,
    PerfObservations,
    PerfParams,
    Speedup,
    fit_perf_params,
    objective,
)
from phalanx.engine.snapshot import Snapshot

#: Fitting rows: (nodes, replicas, local batch, compute seconds, synchronising seconds).
Rows = tuple[tuple[int, int, int, float, float], ...]
#: Fits remembered across jobs at most (the least recently used are forgotten first).
MAX_FITS = 4096
#: A fit from Pollux's single start whose objective is above this (its step times off
#: by some 25% and more) is redone from every start of ``GAMMA_STARTS``: on many rows
#: the single start can diverge (seen: an objective of 26 where four starts give 0.05,
#: a speedup curve with a cliff no measurement shows, a job held at one node for a day).
REFIT_ABOVE = 0.5


class Fits:
    """Fitted throughput models by their fitting rows (kept for a snapshot's life: a fit
    is a pure function of its rows, so a remembered one is the one a fresh fit gives)."""

    def __init__(self, _snapshot: Snapshot) -> None:
        self._by_rows: dict[Rows, PerfParams] = {}

    def perf(self, rows: Rows) -> PerfParams:
        """The fit of ``rows`` (non-empty). The least recently used fit is forgotten
        first, so the fits of the jobs alive now stay while they number under
        ``MAX_FITS`` (a fit is a pure function of its rows: forgetting one changes no
        answer, only what the next one costs)."""
        found = self._by_rows.pop(rows, None)
        if found is not None:
            self._by_rows[rows] = found  # the most recently used now
        else:
            observations = observations_of(rows)
            found = fit_perf_params(observations, gamma_starts=GAMMA_STARTS[:1])
            if objective(found, observations) > REFIT_ABOVE:  # a failed start: try them all
                found = fit_perf_params(observations, gamma_starts=GAMMA_STARTS)
            if len(self._by_rows) >= MAX_FITS:
                del self._by_rows[next(iter(self._by_rows))]
            self._by_rows[rows] = found
        return found


def observations_of(rows: Rows) -> PerfObservations:
    """``rows`` (non-empty) as fitting input."""
    return PerfObservations.of(
        nodes=[r[0] for r in rows],
        replicas=[r[1] for r in rows],
        atomic_bsz=[r[2] for r in rows],
        accum_time=[r[3] for r in rows],
        sync_time=[r[4] for r in rows],
    )


def fitting_rows(timings: tuple[StepTiming, ...]) -> Rows:
    """One fitting row per configuration (nodes, replicas, local batch): its first
    timing with a sync time (Pollux's agent keeps the first of each too).

    A timing's compute step is ``step - sync``; its synchronising step is ``step``."""
    rows: dict[tuple[int, int, int], tuple[int, int, int, float, float]] = {}
    for t in timings:
        sync = t.sync_seconds
        key = (t.nodes, t.replicas, t.local_batch)
        if sync is None or not t.step_seconds > sync or key in rows:
            continue
        rows[key] = (*key, t.step_seconds - sync, t.step_seconds)
    return tuple(rows[key] for key in sorted(rows))


def model_of(
    progress: Progress | None, fits: Fits, *, timings: tuple[StepTiming, ...] | None = None
) -> tuple[GoodputModel, BatchLimits] | None:
    """The job's goodput model and batch bounds from its report (its throughput fitted
    to ``timings``, by default all it reported), or None when it has not reported
    timings, gradient statistics and batch bounds."""
    if progress is None:
        return None
    rows = fitting_rows(progress.timings if timings is None else timings)
    init, largest, bounds = (
        progress.init_batch_size,
        progress.max_batch_size,
        progress.local_batch_bounds,
    )
    if (
        not rows
        or progress.grad_sqr is None
        or progress.grad_var is None
        or init is None
        or largest is None
        or bounds is None
    ):
        return None
    model = GoodputModel(
        perf=fits.perf(rows),
        grad=GradParams(sqr=progress.grad_sqr, var=progress.grad_var),
        init_batch_size=init,
    )
    limits = BatchLimits(max_batch_size=largest, min_atomic_bsz=bounds[0], max_atomic_bsz=bounds[1])
    return model, limits


def speedups(
    progress: Progress | None, fits: Fits, *, most: int, fair: int, per_node: int
) -> NDArray[np.float64]:
    """Speedup at 0..``most`` GPUs (index = GPUs) relative to ``fair`` GPUs (see the
    module docstring); entry 0 is 0."""
    gpus = np.arange(most + 1)
    learnt = model_of(progress, fits)
    if learnt is None:
        return gpus / max(fair, 1)
    model, limits = learnt
    curve = Speedup(model, limits, memo_replicas=1)
    wanted = np.unique(np.append(gpus[1:], fair))
    nodes = np.array([math.ceil(n / per_node) for n in wanted])
    values = dict(zip(wanted.tolist(), curve(nodes, wanted).tolist(), strict=True))
    base = values[fair]
    if not base > 0:
        return gpus / max(fair, 1)
    out = np.zeros(most + 1)
    out[1:] = [values[n] / base for n in gpus[1:].tolist()]
    return out


def remaining_seconds(
    progress: Progress | None, fits: Fits, *, gpus: int, per_node: int
) -> float | None:
    """Seconds ``progress``'s job still needs on ``gpus`` GPUs packed ``per_node`` to a
    node, at its best batch and its current statistical efficiency (None when it has not
    reported its target, what it has done, or its goodput model)."""
    if progress is None or progress.total_samples is None or progress.samples is None:
        return None
    learnt = model_of(progress, fits)
    if learnt is None:
        return None
    model, limits = learnt
    nodes = math.ceil(gpus / per_node)
    goodput = float(model.optimize(nodes, gpus, limits).goodput)
    if not goodput > 0:
        return None
    return max(0.0, progress.total_samples - progress.samples) / goodput
