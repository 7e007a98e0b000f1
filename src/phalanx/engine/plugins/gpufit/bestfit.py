"""bestfit: the node whose free CPU and GPU the task would leave smallest.

The authors' Best-Fit baseline (Weng et al., ATC '23; ``pkg/simulator/plugin/
best_fit_score.go`` of ``hkust-adsl/kubernetes-scheduler-simulator``): a node scores
``int(100 x (1 - 0.5 (cpu_free - cpu_req) / 128000 - 0.5 (gpu_free - gpu_req) / 8000))``
with GPU in milli-GPU summed over the node's cards. Their min-max normalisation of the
scores is left out: integer scores span at most 100, so it never changes their order
or their ties.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.plugins.gpufit.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    CpuGpu,
    Fit,
    PlainFitPlugin,
)
from phalanx.engine.snapshot import TaskInfo


class BestFitPlugin(PlainFitPlugin):
    """Least CPU and GPU left over on the node, equally weighted."""

    name = "bestfit"

    def points(self, state: Fit, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        room = CpuGpu.of(state.snapshot, task, nodes)
        left_cpu = room.free_cpu - room.cpu
        left_gpu = room.free_gpu - room.gpu
        raw = 0.5 * left_cpu / MAX_SPEC_CPU + 0.5 * left_gpu / MAX_SPEC_GPU
        fit = np.trunc((1.0 - raw) * 100.0)
        return np.where((left_cpu < 0) | (left_gpu < 0), 0.0, fit)
