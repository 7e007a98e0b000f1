"""A replay's figures: each run, each step across runs, and the simulation's metrics.

``summary`` is what ``phalanx sim pipeline`` writes as ``summary.json`` (and prints with
``--json``): plain JSON values, times in simulated seconds rounded to milliseconds.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from phalanx.sim.pipeline.replay import Replay, RunOutcome, UnitOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFigures:
    """One step over every run: how its units ended, and the averages of those placed."""

    step: str
    phases: dict[str, int]  # units per phase
    avg_queue_delay: float | None  # over units whose jobs were placed
    avg_jct: float | None  # over units that ended after running
    avg_span: float | None  # per run: first submission to last end of the step's units


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 3) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def step_figures(replay: Replay) -> list[StepFigures]:
    """Per step, in graph order (then finally steps)."""
    by_step: dict[str, list[UnitOutcome]] = {}
    spans: dict[str, list[float]] = {}
    for run in replay.runs:
        per_run: dict[str, list[UnitOutcome]] = {}
        for unit in run.units:
            by_step.setdefault(unit.step, []).append(unit)
            per_run.setdefault(unit.step, []).append(unit)
        for step, units in per_run.items():
            submitted = [u.submitted for u in units if u.submitted is not None]
            ended = [u.ended for u in units if u.ended is not None and u.submitted is not None]
            if submitted and ended and len(ended) == len(submitted):
                spans.setdefault(step, []).append(max(ended) - min(submitted))
    return [
        StepFigures(
            step=step,
            phases=dict(sorted(Counter(u.phase.value for u in units).items())),
            avg_queue_delay=_mean([u.queue_delay for u in units if u.queue_delay is not None]),
            avg_jct=_mean([u.jct for u in units if u.jct is not None]),
            avg_span=_mean(spans.get(step, [])),
        )
        for step, units in by_step.items()
    ]


def _run(run: RunOutcome) -> dict[str, object]:
    return {
        "id": run.id,
        "phase": run.phase.value,
        "arrival_s": run.arrival,
        "end_s": _round(run.ended),
        "makespan_s": _round(run.makespan),
        "units": [
            {
                "unit": u.unit,
                "phase": u.phase.value,
                "reason": u.reason,
                "jobs": list(u.jobs),
                "submit_s": _round(u.submitted),
                "start_s": _round(u.started),
                "end_s": _round(u.ended),
                "queue_delay_s": _round(u.queue_delay),
                "jct_s": _round(u.jct),
            }
            for u in run.units
        ],
    }


def summary(replay: Replay) -> dict[str, object]:
    """The replay as JSON values: runs, steps, makespans and the simulation's summary."""
    makespans = [r.makespan for r in replay.runs if r.makespan is not None]
    return {
        "pipeline": replay.pipeline,
        "runs": len(replay.runs),
        "finished_runs": len(makespans),
        "avg_makespan_s": _mean(makespans),
        "max_makespan_s": _round(max(makespans)) if makespans else None,
        "steps": {
            f.step: {
                "phases": f.phases,
                "avg_queue_delay_s": f.avg_queue_delay,
                "avg_jct_s": f.avg_jct,
                "avg_span_s": f.avg_span,
            }
            for f in step_figures(replay)
        },
        "run_details": [_run(run) for run in replay.runs],
        "sim": replay.metrics.summary(sim_wall_s=replay.wall_seconds),
    }
