"""Tables of ``phalanx sim pipeline``: the replay's summary (``phalanx.sim.pipeline.summary``)
for people. Rendering only: the command itself is in ``phalanx.cli.sim``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

#: The simulation figures shown under a replay (summary.json holds them all).
SIM_FIGURES = (
    "jobs",
    "finished",
    "failed",
    "avg_queue_delay_s",
    "makespan_s",
    "gpu_alloc_ratio_avg",
    "cpu_alloc_ratio_avg",
    "preemptions",
    "sim_wall_s",
)


def _s(value: object) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def runs_table(summary: Mapping[str, Any]) -> Table:
    """One row per run: phase, arrival, end and makespan."""
    table = Table(title=f"pipeline {summary['pipeline']}: runs (seconds)")
    for name in ("run", "phase", "arrival", "end", "makespan"):
        table.add_column(name, justify="left" if name in ("run", "phase") else "right")
    for run in summary["run_details"]:
        table.add_row(
            run["id"], run["phase"], _s(run["arrival_s"]), _s(run["end_s"]), _s(run["makespan_s"])
        )
    return table


def units_table(run: Mapping[str, Any]) -> Table:
    """One row per unit of one run: its times, queue delay, JCT and reason (the column
    shown when some unit has one)."""
    table = Table(title=f"run {run['id']}: steps (seconds; delay: waiting to be placed)")
    for name in ("unit", "phase", "submit", "start", "end", "delay", "JCT"):
        left = name in ("unit", "phase")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    reasons = any(unit["reason"] for unit in run["units"])
    if reasons:
        table.add_column("reason", overflow="fold")
    for unit in run["units"]:
        table.add_row(
            unit["unit"],
            unit["phase"],
            *(_s(unit[k]) for k in ("submit_s", "start_s", "end_s", "queue_delay_s", "jct_s")),
            *([unit["reason"]] if reasons else []),
        )
    return table


def steps_table(summary: Mapping[str, Any]) -> Table:
    """One row per step over every run: units by phase, average queue delay, JCT, span."""
    table = Table(title=f"steps over {summary['runs']} run(s) (seconds)")
    for name in ("step", "units", "avg delay", "avg JCT", "avg span"):
        table.add_column(name, justify="left" if name in ("step", "units") else "right")
    for step, figures in summary["steps"].items():
        phases = ", ".join(f"{count} {phase}" for phase, count in figures["phases"].items())
        table.add_row(
            step,
            phases,
            _s(figures["avg_queue_delay_s"]),
            _s(figures["avg_jct_s"]),
            _s(figures["avg_span_s"]),
        )
    return table


def figures_table(summary: Mapping[str, Any]) -> Table:
    """The makespans and the simulation's headline figures."""
    table = Table(title="simulation")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key in ("avg_makespan_s", "max_makespan_s", "finished_runs"):
        table.add_row(key, _s(summary[key]))
    for key in SIM_FIGURES:
        table.add_row(key, _s(summary["sim"].get(key)))
    return table


def tables(summary: Mapping[str, Any]) -> list[Table]:
    """What the command prints: the runs, each step's units when there is one run, the
    steps over all runs, and the figures."""
    shown = [runs_table(summary)]
    if summary["runs"] == 1:
        shown.append(units_table(summary["run_details"][0]))
    return [*shown, steps_table(summary), figures_table(summary)]
