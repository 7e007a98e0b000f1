"""The one fragment kernel: F_n(m) of many node states for every task type of a target
workload, in milli-GPU. The checked measure (``fragmentation``) and the ``fgd`` plugin's
memo (``memo``) both compute a node's fragment here and nowhere else.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.plugins.fgd.workload import TargetWorkload

__all__ = ["FragmentKernel"]


class FragmentKernel:
    """F_n(M) in milli-GPU for many node states at once, for trusted inputs (the checked
    measure validates its arguments first; the ``fgd`` plugin's memo passes the states it
    interned). Built once per target workload.

    ``free_cpu`` (millicores, one per state) and ``free_cards`` (whole milli-GPUs, states
    x card slots, 0 for slots a node lacks) are not validated, memory is checked only
    when ``free_memory`` is given (the authors' simulator does not), and the result is
    not clipped; otherwise it equals ``node_fragmentation`` x 1000. Card counts and
    unusable amounts are computed once per distinct per-card request of the workload (a
    handful), not per task type, and the sum over task types runs in one fixed order per
    row, so equal rows give bit-equal results.
    """

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        thresholds, self._column = np.unique(workload.gpu_per_card_milli, return_inverse=True)
        self._thresholds = thresholds[np.newaxis, np.newaxis, :]
        self._cards = workload.gpu_cards[np.newaxis, :]
        self._cpu = workload.cpu[np.newaxis, :]
        self._memory = workload.memory[np.newaxis, :]
        self._needs_gpu = workload.gpu_cards[np.newaxis, :] > 0
        self._popularity = workload.popularity[np.newaxis, :]

    def __call__(
        self,
        free_cpu: NDArray[np.float64],
        free_cards: NDArray[np.int64],
        allowed: NDArray[np.bool_] | None = None,
        free_memory: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """F of each state; ``allowed`` (states x task types) and ``free_memory`` (bytes,
        one per state: then memory is checked too) are optional, as in ``task_fragments``."""
        fragments = self.fragments(free_cpu, free_cards, allowed, free_memory)
        expected: NDArray[np.float64] = (fragments * self._popularity).sum(axis=1)
        return expected

    def fragments(
        self,
        free_cpu: NDArray[np.float64],
        free_cards: NDArray[np.int64],
        allowed: NDArray[np.bool_] | None = None,
        free_memory: NDArray[np.float64] | None = None,
    ) -> NDArray[np.int64]:
        """F_n(m) of each state n (rows) for each task type m (columns), before weighting
        by popularity: depends on the task types only, not on their popularity."""
        below = free_cards[:, :, np.newaxis] < self._thresholds  # states x slots x thresholds
        unusable = np.where(below, free_cards[:, :, np.newaxis], 0).sum(axis=1)
        usable = free_cards.shape[1] - below.sum(axis=1)
        fits = (usable[:, self._column] >= self._cards) & self._needs_gpu
        fits &= free_cpu[:, np.newaxis] >= self._cpu
        if free_memory is not None:
            fits &= free_memory[:, np.newaxis] >= self._memory
        if allowed is not None:
            fits &= allowed
        total = free_cards.sum(axis=1)[:, np.newaxis]
        fragments: NDArray[np.int64] = np.where(fits, unusable[:, self._column], total)
        return fragments
