"""goodput: Pollux's goodput-optimising sizes for elastic jobs, as a plugin.

``models`` learns each job's speedup from its reports, ``search`` picks the sizes that
maximise the power mean of the speedups, ``plugin`` puts them together on the
``elastic_targets`` extension point for the ``elastic`` action.
"""

from phalanx.engine.plugins.goodput.plugin import GoodputPlugin

__all__ = ["GoodputPlugin"]
