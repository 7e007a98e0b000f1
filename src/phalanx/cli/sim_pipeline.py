"""The parts of ``phalanx sim pipeline`` (the command is in ``phalanx.cli.sim``): reading its
pipeline file and interval, its events file, and the tables of the replay's summary
(``phalanx.sim.pipeline.summary``) for people."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from rich.table import Table

from phalanx.domain.errors import InvalidInput
from phalanx.domain.queue import Queue
from phalanx.spec import QueueDocument, load_file, parse_duration
from phalanx.spec.pipeline import PipelineDocument

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


def pipeline_file(path: Path) -> tuple[PipelineDocument, tuple[Queue, ...]]:
    """The one Pipeline document of ``path`` and the Queue documents beside it."""
    documents = load_file(path)
    pipelines = [d for d in documents if isinstance(d, PipelineDocument)]
    if len(pipelines) != 1:
        raise InvalidInput(
            f"{path}: holds {len(pipelines)} Pipeline documents",
            fix="give a file with exactly one Pipeline (and, optionally, its Queues)",
        )
    queues = tuple(d.to_domain() for d in documents if isinstance(d, QueueDocument))
    return pipelines[0], queues


def seconds(text: str) -> float:
    """``0``, ``90``, ``30s``, ``5m``: seconds, at least 0."""
    try:
        value = float(text)
    except ValueError:
        return parse_duration(text)
    if not value >= 0 or value == float("inf"):
        raise InvalidInput("not a duration", fix="give seconds >= 0, or 5m")
    return value


@contextmanager
def events_file(out: Path | None) -> Iterator[TextIO | None]:
    """events.jsonl in ``out`` (made), or nowhere."""
    if out is None:
        yield None
        return
    out.mkdir(parents=True, exist_ok=True)
    with (out / "events.jsonl").open("w", encoding="utf-8") as stream:
        yield stream
