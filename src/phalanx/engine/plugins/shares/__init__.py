"""The queue-share plugins, each a way to give queues their deserved share on one base:

- ``capacity``: explicit guarantee / deserved / capability over the queue tree;
- ``proportion``: weight-proportional shares, water-filled and capped by demand;
- ``base``: ``QueueSharePlugin``, what both do with the shares once given (capability
  limits, share order, admission, reclaim victims), and ``water_fill``.
"""

from phalanx.engine.plugins.shares.capacity import CapacityPlugin
from phalanx.engine.plugins.shares.proportion import ProportionPlugin

__all__ = ["CapacityPlugin", "ProportionPlugin"]
