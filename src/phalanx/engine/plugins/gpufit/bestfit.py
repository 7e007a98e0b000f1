"""bestfit: the node whose free CPU and GPU the task would leave smallest.

The authors' Best-Fit baseline (Weng et al., ATC '23; ``pkg/simulator/plugin/
best_fit_score.go`` of ``hkust-adsl/kubernetes-scheduler-simulator``): a node scores
``int(100 x (1 - 0.5 (cpu_free - cpu_req) / 128000 - 0.5 (gpu_free - gpu_req) / 8000))``
with GPU in milli-GPU summed over the node's cards. Their min-max normalisation of the
scores is left out: integer scores span at most 100, so it never changes their order
or their ties. A share of a GPU goes to the fullest card that holds it (their ``best``
GPU selection); whole cards to the lowest-index free ones.

Guarantees: scores are integers in 0..100 (plus, with ``seed``, a tie-break below half a
point: a seeded random node order, the same for every task); a node's score depends only
on that node; never picks a card that cannot serve the task.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.gpufit.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    Fit,
    GpuFitPlugin,
    free_cpu,
    free_gpu_milli,
    task_cpu,
    task_gpu_milli,
)
from phalanx.engine.snapshot import TaskInfo


class BestFitPlugin(GpuFitPlugin[Fit]):
    """Least CPU and GPU left over on the node, equally weighted."""

    name = "bestfit"

    def open(self, session: Session) -> Fit:
        return Fit.of(self, session)

    def points(self, state: Fit, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        snapshot = state.snapshot
        left_cpu = free_cpu(snapshot, nodes) - task_cpu(snapshot, task)
        left_gpu = free_gpu_milli(snapshot.cards, nodes) - task_gpu_milli(task.role.cards)
        raw = 0.5 * left_cpu / MAX_SPEC_CPU + 0.5 * left_gpu / MAX_SPEC_GPU
        fit = np.trunc((1.0 - raw) * 100.0)
        return np.where((left_cpu < 0) | (left_gpu < 0), 0.0, fit)
