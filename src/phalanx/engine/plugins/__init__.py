"""Plugins: the nouns of a session, a module per small plugin and a package per large one
(fgd, hived, gpufit, shares, userlimits); ``BUILTIN_PLUGINS`` lists every built-in one."""

from typing import Any

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.plugins.balanced import BalancedPlugin
from phalanx.engine.plugins.binpack import BinpackPlugin, SpreadPlugin
from phalanx.engine.plugins.colocation import ColocationPlugin
from phalanx.engine.plugins.compact import CompactPlugin
from phalanx.engine.plugins.datalocality import DataLocalityPlugin
from phalanx.engine.plugins.drf import DrfPlugin
from phalanx.engine.plugins.fairshare import FairsharePlugin
from phalanx.engine.plugins.fgd import FgdPlugin
from phalanx.engine.plugins.gang import GangPlugin
from phalanx.engine.plugins.goodput import GoodputPlugin
from phalanx.engine.plugins.gpufit.bestfit import BestFitPlugin
from phalanx.engine.plugins.gpufit.dotprod import DotProdPlugin
from phalanx.engine.plugins.gpufit.gpuclustering import GpuClusteringPlugin
from phalanx.engine.plugins.gpufit.gpupacking import GpuPackingPlugin
from phalanx.engine.plugins.gpushare import GpuSharePlugin
from phalanx.engine.plugins.gputopology import GpuTopologyPlugin
from phalanx.engine.plugins.hived import HivedPlugin
from phalanx.engine.plugins.las import LasPlugin
from phalanx.engine.plugins.networktopology import NetworkTopologyPlugin
from phalanx.engine.plugins.overcommit import OvercommitPlugin
from phalanx.engine.plugins.predicates import PredicatesPlugin
from phalanx.engine.plugins.priority import PriorityPlugin
from phalanx.engine.plugins.random import RandomPlugin
from phalanx.engine.plugins.reclaimable import ReclaimablePlugin
from phalanx.engine.plugins.shares.capacity import CapacityPlugin
from phalanx.engine.plugins.shares.proportion import ProportionPlugin
from phalanx.engine.plugins.sjf import SjfPlugin
from phalanx.engine.plugins.sla import SlaPlugin
from phalanx.engine.plugins.userlimits import UserLimitsPlugin

BUILTIN_PLUGINS: tuple[type[Plugin[Any]], ...] = (
    BalancedPlugin,
    BestFitPlugin,
    BinpackPlugin,
    CapacityPlugin,
    ColocationPlugin,
    CompactPlugin,
    DataLocalityPlugin,
    DotProdPlugin,
    DrfPlugin,
    FairsharePlugin,
    FgdPlugin,
    GangPlugin,
    GoodputPlugin,
    GpuClusteringPlugin,
    GpuPackingPlugin,
    GpuSharePlugin,
    GpuTopologyPlugin,
    HivedPlugin,
    LasPlugin,
    NetworkTopologyPlugin,
    OvercommitPlugin,
    PredicatesPlugin,
    PriorityPlugin,
    ProportionPlugin,
    RandomPlugin,
    ReclaimablePlugin,
    SjfPlugin,
    SlaPlugin,
    SpreadPlugin,
    UserLimitsPlugin,
)

__all__ = ["BUILTIN_PLUGINS"]
