"""dotprod: Tetris's alignment score, the node whose free resources align least with the task.

The authors' DotProd baseline (Weng et al., ATC '23, after Grandl et al., "Multi-Resource
Packing for Cluster Schedulers", SIGCOMM '14), as their experiments run it
(``pkg/simulator/plugin/dot_product_score.go`` with ``dimExtMethod: merge`` and
``normMethod: max``; ``experiments/run_scripts/generate_run_scripts.py``): with free
CPU and the node's total free milli-GPU normalised by 128000 and 8000, a node scores
``int(100 x (1 - (cpu_free x cpu_req + gpu_free x gpu_req) / 2))``, i.e. the smaller the
dot product of the node's free vector and the task's request, the better.
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


class DotProdPlugin(PlainFitPlugin):
    """Smallest dot product of the node's free (CPU, GPU) and the task's request."""

    name = "dotprod"

    def points(self, state: Fit, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        room = CpuGpu.of(state.snapshot, task, nodes)
        cpu = room.cpu / MAX_SPEC_CPU
        gpu = room.gpu / MAX_SPEC_GPU
        node_cpu = room.free_cpu / MAX_SPEC_CPU
        node_gpu = room.free_gpu / MAX_SPEC_GPU
        dot = node_cpu * cpu + node_gpu * gpu
        fit: NDArray[np.float64] = np.trunc((1.0 - dot / 2.0) * 100.0)
        return fit
