"""The policy engine: one scheduling session over a snapshot returns Decisions.

``run_cycle(snapshot, config, now=...)`` is the single entry point that the simulator
and the control plane share. Nothing here does I/O or reads the clock.
"""

from phalanx.engine.cycle import run_cycle
from phalanx.engine.decisions import (
    Admit,
    Bind,
    Decisions,
    Evict,
    Pipeline,
    Reason,
    ReasonCode,
    Reservation,
    Unschedulable,
)
from phalanx.engine.framework.config import (
    ActionConfig,
    PluginConfig,
    SchedulerConfig,
    default_config,
)
from phalanx.engine.snapshot import Snapshot

__all__ = [
    "ActionConfig",
    "Admit",
    "Bind",
    "Decisions",
    "Evict",
    "Pipeline",
    "PluginConfig",
    "Reason",
    "ReasonCode",
    "Reservation",
    "SchedulerConfig",
    "Snapshot",
    "Unschedulable",
    "default_config",
    "run_cycle",
]
