"""Speedup of an allocation: its best goodput over the best goodput on one GPU.

Pollux's policy scores every candidate allocation of every job with this (OSDI '21,
section 4.2), so it is vectorised and memoised: a ``Speedup`` is built for one job's
model and limits (both frozen), computes each distinct (nodes, replicas) once, and
answers repeated ones from a table. The table never goes stale: the model it was
computed from cannot change; a new model (a refit, new gradient statistics) is a new
``Speedup``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from phalanx.engine.goodput.goodput import BatchLimits, GoodputModel

#: Allocations with fewer replicas than this are memoised (Pollux keeps 32; phalanx's
#: clusters are larger).
MEMO_REPLICAS = 129


class Speedup:
    """``speedup(nodes, replicas)``: goodput on ``replicas`` GPUs over ``nodes`` nodes
    divided by goodput on one GPU, both at their best batch configuration within
    ``limits``. 0 for the empty allocation (0, 0); at least 0 everywhere."""

    __slots__ = ("_base", "_limits", "_memo", "_model")

    def __init__(
        self, model: GoodputModel, limits: BatchLimits, *, memo_replicas: int = MEMO_REPLICAS
    ) -> None:
        self._model = model
        self._limits = limits
        self._base = float(model.optimize(1, 1, limits).goodput)
        # memo[nodes, replicas]: the speedup, or -1 while not computed.
        self._memo = np.full((memo_replicas, memo_replicas), -1.0)
        self._memo[0, 0] = 0.0

    @property
    def model(self) -> GoodputModel:
        """The goodput model the speedups come from."""
        return self._model

    @property
    def base_goodput(self) -> float:
        """Best goodput on one GPU (progress in samples at the initial batch per second)."""
        return self._base

    def __call__(self, nodes: ArrayLike, replicas: ArrayLike) -> NDArray[np.float64]:
        """Speedups of the broadcast ``nodes`` and ``replicas`` (each allocation has
        0 = nodes = replicas or 1 <= nodes <= replicas); float64 of that shape."""
        n_in = np.asarray(nodes, dtype=np.int64)
        r_in = np.asarray(replicas, dtype=np.int64)
        if n_in.shape != r_in.shape:
            n_in, r_in = np.broadcast_arrays(n_in, r_in)
        shape = n_in.shape
        n = n_in.reshape(-1)
        r = r_in.reshape(-1)
        if ((n < 0) | (n > r) | ((n == 0) != (r == 0))).any():
            raise ValueError("each allocation needs 0 = nodes = replicas or 1 <= nodes <= replicas")
        size = self._memo.shape[0]
        held = r < size
        out = np.full(n.shape, -1.0)
        out[held] = self._memo[n[held], r[held]]
        missing = out < 0
        if missing.any():
            pairs, inverse = np.unique(
                np.stack([n[missing], r[missing]]), axis=1, return_inverse=True
            )
            goodput = self._model.optimize(pairs[0], pairs[1], self._limits).goodput
            values = goodput / self._base
            keep = pairs[1] < size
            self._memo[pairs[0][keep], pairs[1][keep]] = values[keep]
            out[missing] = values[inverse.reshape(-1)]
        return out.reshape(shape)
