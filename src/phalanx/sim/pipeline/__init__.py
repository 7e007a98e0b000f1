"""Pipelines in the simulator: a Pipeline document's runs replayed as jobs.

``replay_pipeline`` (``replay``) runs the workflow planner over simulated jobs;
``load_timings`` (``timings``) reads what each step takes; ``summary`` (``report``)
turns a ``Replay`` into figures: per run its makespan, per step its units' queue delay
and JCT, and the simulation's usual metrics. ``phalanx sim pipeline`` is the command.
"""

from phalanx.sim.pipeline.replay import (
    SIM_WORKSPACE,
    Replay,
    RunOutcome,
    UnitOutcome,
    check_replayable,
    pipeline_queues,
    replay_pipeline,
)
from phalanx.sim.pipeline.report import step_figures, summary
from phalanx.sim.pipeline.timings import Timing, Timings, load_timings, timings_of

__all__ = [
    "SIM_WORKSPACE",
    "Replay",
    "RunOutcome",
    "Timing",
    "Timings",
    "UnitOutcome",
    "check_replayable",
    "load_timings",
    "pipeline_queues",
    "replay_pipeline",
    "step_figures",
    "summary",
    "timings_of",
]
