"""The FGD paper's GPU-fit baselines, each a score formula on one base (``base``):

- ``bestfit``: the node whose free CPU and GPU the task would leave smallest;
- ``dotprod``: the node whose free resources align least with the task (Tetris);
- ``gpupacking``: partly used cards first, then partly used nodes, then empty nodes;
- ``gpuclustering``: tasks of one GPU shape together on the same nodes.

``base`` also holds what the paper's plugins share (``fgd`` and ``random`` too): node
views in the authors' units, their card choice and their seeded tie-break.
"""

from phalanx.engine.plugins.gpufit.bestfit import BestFitPlugin
from phalanx.engine.plugins.gpufit.dotprod import DotProdPlugin
from phalanx.engine.plugins.gpufit.gpuclustering import GpuClusteringPlugin
from phalanx.engine.plugins.gpufit.gpupacking import GpuPackingPlugin

__all__ = ["BestFitPlugin", "DotProdPlugin", "GpuClusteringPlugin", "GpuPackingPlugin"]
