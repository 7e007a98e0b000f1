"""fgd: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23) as a plugin.

One package, one concern a module:

- ``plugin``: ``FgdPlugin``, the node and card whose use fragments GPUs least;
- ``learn``: the target learnt from a snapshot's newest jobs, kept as jobs come and go;
- ``fragmentation``: the measure (task shapes, target workloads, per node and per
  cluster fragmentation) the plugin and the simulator share;
- ``memo``: the plugin's memo of node states and their fragments and scores.
"""

from phalanx.engine.plugins.fgd.plugin import FgdPlugin

__all__ = ["FgdPlugin"]
