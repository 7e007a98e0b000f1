"""gpupacking: fill partly used cards first, then partly used nodes, then empty nodes.

The authors' GPU-Packing baseline (Weng et al., ATC '23; ``pkg/simulator/plugin/
gpu_packing_score.go`` of ``hkust-adsl/kubernetes-scheduler-simulator``), three bands
from best to worst:

1. the task fits on partly used cards: ``100 - (sum of those cards' free percent) // 10``,
   at least 50 (a share of a GPU uses its best-fitting card);
2. it must open whole free cards on a node already in use: ``50 - cards opened``, at
   least 33;
3. every card of the node is free: ``max(33 - free cards, free cards)``.

A task without GPU scores 0 everywhere.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import WHOLE
from phalanx.engine.plugins.gpufit.base import Fit, PlainFitPlugin
from phalanx.engine.snapshot import TaskInfo


class GpuPackingPlugin(PlainFitPlugin):
    """Partly used cards, then partly used nodes, then free nodes."""

    name = "gpupacking"

    def points(self, state: Fit, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        cards = state.snapshot.cards
        demand = task.role.cards
        if demand is None:
            return np.zeros(len(nodes))  # 0 everywhere: the tie-break decides
        free = cards.open_milli(nodes)  # a cordoned card: absent, as the device plugin says
        count = (free >= 0).sum(axis=1)
        whole_free = (free == WHOLE).sum(axis=1)
        empty = np.maximum(33 - whole_free, whole_free).astype(np.float64)
        if demand.shared:
            best = np.where(free >= demand.milli, free, np.inf).min(axis=1)
            fits = np.isfinite(best)
            percent = np.floor(np.where(fits, best, 0.0) * 100.0 / WHOLE)
            shared = np.maximum(100.0 - np.floor(percent / 10.0), 50.0)
            fit = np.where(best == WHOLE, max(50.0 - 1, 33.0), shared)
        else:
            fits = whole_free >= demand.whole
            fit = np.full(len(nodes), max(50.0 - demand.whole, 33.0))
        return np.where(whole_free == count, empty, np.where(fits, fit, 0.0))
