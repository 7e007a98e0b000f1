"""fgd: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23) as a plugin.

One package, one concern a module:

- ``plugin``: ``FgdPlugin``, the node and card whose use fragments GPUs least;
- ``workload``: the target workload (task shapes, popularity) and how it is learnt
  from observed tasks;
- ``learn``: the target learnt from a snapshot's newest jobs, kept as jobs come and go;
- ``kernel``: the one fragment kernel, a node state's fragment per task type;
- ``fragmentation``: the checked measure (per node, per cluster) the simulator reports;
- ``memo``: the plugin's memo of node states and their fragments and scores.
"""

from phalanx.engine.plugins.fgd.plugin import FgdPlugin

__all__ = ["FgdPlugin"]
