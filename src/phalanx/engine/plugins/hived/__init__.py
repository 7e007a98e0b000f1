"""hived: virtual clusters with topology-shaped guarantees (HiveD, OSDI'20) as a plugin.

One package, one concern a module:

- ``plugin``: ``HivedPlugin``, its extension points and reasons;
- ``celltree``: the physical cells of a snapshot's nodes as one tree of integer ids;
- ``buddy``: buddy allocation of virtual clusters' cells to whole physical cells;
- ``virtual``: the session's virtual clusters, their bindings and tasks;
- ``cellplan``: where a guaranteed task goes inside its cluster's cells;
- ``opportunistic``: where other GPU work goes so that guaranteed cells stay whole.
"""

from phalanx.engine.plugins.hived.plugin import HivedPlugin

__all__ = ["HivedPlugin"]
