"""Goodput = throughput x statistical efficiency, and the batch size that maximises it.

``optimize`` follows Pollux's ``GoodputFunction.optimize`` (OSDI '21, section 3.3) to
the sample: for each allocation it tries 50 total batch sizes spaced geometrically from
``max(init_batch_size, min_atomic_bsz * replicas)`` to ``max_batch_size``; each is
split into ``atomic_bsz`` per replica and ``accum_steps`` extra compute steps (more than
``max_atomic_bsz`` per replica is split into accumulation steps; one replica above the
initial batch always accumulates at least once, because its gradient statistics need
two micro-batches); a configuration whose ``atomic_bsz`` falls outside
``[min_atomic_bsz, max_atomic_bsz]`` scores 0; the first best one wins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from phalanx.engine.goodput.efficiency import GradParams, efficiency
from phalanx.engine.goodput.perf import PerfParams, throughput

#: Candidate total batch sizes tried per allocation (Pollux's ``np.geomspace`` default).
CANDIDATES = 50
#: Tolerance of the ceilings that split a batch (Pollux's ``eps``).
EPS = 1e-8


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchLimits:
    """What a job's batch may be: total samples per iteration at most
    ``max_batch_size``; per replica and step between ``min_atomic_bsz`` and
    ``max_atomic_bsz`` samples; gradient accumulation allowed or not."""

    max_batch_size: int
    min_atomic_bsz: int = 1
    max_atomic_bsz: int | None = None
    accumulation: bool = True

    @property
    def atomic_cap(self) -> int:
        """The largest step per replica (``max_batch_size`` when none is given)."""
        return self.max_atomic_bsz if self.max_atomic_bsz is not None else self.max_batch_size


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchChoice:
    """The best configuration per allocation: goodput (progress per second, in samples
    at the initial batch size), samples per replica per step, extra compute steps."""

    goodput: NDArray[np.float64]
    atomic_bsz: NDArray[np.int64]
    accum_steps: NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class GoodputModel:
    """A job's goodput model: its fitted throughput and its current gradient statistics,
    for progress counted in samples at ``init_batch_size``."""

    perf: PerfParams
    grad: GradParams
    init_batch_size: int

    def evaluate(
        self,
        nodes: ArrayLike,
        replicas: ArrayLike,
        atomic_bsz: ArrayLike,
        accum_steps: ArrayLike,
    ) -> NDArray[np.float64]:
        """Goodput of each configuration. Raises ValueError when a total batch is below
        the initial batch size (efficiency is defined from there up)."""
        batch = np.asarray(replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
        if np.any(batch < self.init_batch_size):
            raise ValueError(
                f"batch sizes must be at least the initial {self.init_batch_size}: "
                "give more samples per replica"
            )
        speed = throughput(self.perf, nodes, replicas, atomic_bsz, accum_steps)
        result: NDArray[np.float64] = speed * efficiency(self.grad, batch, self.init_batch_size)
        return result

    def optimize(self, nodes: ArrayLike, replicas: ArrayLike, limits: BatchLimits) -> BatchChoice:
        """The best batch configuration of each allocation (arrays of the broadcast shape
        of ``nodes`` and ``replicas``; 1 <= nodes <= replicas)."""
        n_in, r_in = np.broadcast_arrays(np.asarray(nodes), np.asarray(replicas))
        shape = n_in.shape
        n = n_in.reshape(-1).astype(np.int64)
        r = r_in.reshape(-1).astype(np.int64)
        if np.any(n < 1) or np.any(n > r):
            raise ValueError("each allocation needs 1 <= nodes <= replicas")
        if self.init_batch_size > limits.max_batch_size:
            raise ValueError("max_batch_size is below the initial batch size: raise it")
        smallest = np.maximum(self.init_batch_size, limits.min_atomic_bsz * r)
        batch = np.geomspace(smallest, limits.max_batch_size, CANDIDATES)  # (50, k)
        local = batch / r
        cap = limits.atomic_cap
        if limits.accumulation:
            accum = np.ceil(local / cap - EPS) - 1
            lonely = (r == 1) & (local > self.init_batch_size + EPS)
            accum = np.where(lonely, np.maximum(accum, 1), accum)
        else:
            accum = np.zeros_like(local)
        accum_steps = accum.astype(np.int64)
        atomic = np.ceil(local / (accum_steps + 1) - EPS).astype(np.int64)
        good = self.evaluate(n, r, atomic, accum_steps)
        valid = (limits.min_atomic_bsz <= atomic) & (atomic <= cap)
        good = np.where(valid, good, 0.0)
        best = np.argmax(good, axis=0)
        cols = np.arange(good.shape[1])
        return BatchChoice(
            goodput=good[best, cols].reshape(shape),
            atomic_bsz=atomic[best, cols].reshape(shape),
            accum_steps=accum_steps[best, cols].reshape(shape),
        )
