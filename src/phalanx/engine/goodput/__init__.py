"""Pollux's goodput model (Qiao et al., OSDI '21), pure numpy.

- ``perf``: the iteration-time model (``PerfParams``) and throughput;
- ``fit``: fitting ``PerfParams`` to measured steps with Pollux's objective and priors;
- ``efficiency``: statistical efficiency from gradient statistics (``GradParams``);
- ``goodput``: throughput x efficiency and the best batch configuration;
- ``speedup``: goodput of an allocation over one GPU's, memoised for a scheduler.

No I/O, no clock: the scheduler passes measurements in.
"""

from phalanx.engine.goodput.efficiency import GradParams, efficiency, gain
from phalanx.engine.goodput.fit import GAMMA_STARTS, PerfObservations, fit_perf_params, objective
from phalanx.engine.goodput.goodput import BatchChoice, BatchLimits, GoodputModel
from phalanx.engine.goodput.perf import (
    PerfParams,
    accum_time,
    iteration_time,
    network_time,
    throughput,
)
from phalanx.engine.goodput.speedup import Speedup

__all__ = [
    "GAMMA_STARTS",
    "BatchChoice",
    "BatchLimits",
    "GoodputModel",
    "GradParams",
    "PerfObservations",
    "PerfParams",
    "Speedup",
    "accum_time",
    "efficiency",
    "fit_perf_params",
    "gain",
    "iteration_time",
    "network_time",
    "objective",
    "throughput",
]
