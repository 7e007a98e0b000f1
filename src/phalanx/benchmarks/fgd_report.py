"""``phalanx bench fgd``: runs the replays, writes the authors' CSV and a chart, and the
130% figures next to the authors' for the same seeds (their cached results)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from statistics import mean

import numpy as np

from phalanx.benchmarks.fgd import (
    POLICIES,
    STEPS,
    Run,
    Subsample,
    read_expected,
    run_one,
    write_csv,
)
from phalanx.sim.svg import Canvas, Scale, color, esc, nice_ticks

CSV_NAME = "analysis_allo_discrete.csv"
SVG_NAME = "analysis_allo_discrete.svg"


def bench(
    traces_dir: Path,
    workloads: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    *,
    tune: float = 1.3,
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, object]:
    """Every workload x policy x seed; writes ``OUT/analysis_allo_discrete.{csv,svg}`` and
    returns the JSON summary. ``progress`` hears (run label, arrivals done, arrivals)
    after each session. With ``limit``, every run is a subsample (``Subsample``): the
    summary says so and leaves the authors' full-trace figures out."""
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    runs = []
    for workload in workloads:
        for policy in policies:
            for seed in seeds:
                label = f"{workload} {policy} seed {seed}"
                hear = None if progress is None else partial(progress, label)
                runs.append(
                    run_one(
                        traces_dir, workload, policy, seed, tune=tune, limit=limit, progress=hear
                    )
                )
    write_csv(out / CSV_NAME, [run.row() for run in runs])
    expected = _expected_at(traces_dir)
    (out / SVG_NAME).write_text(_chart(runs, traces_dir, workloads[0]))
    return _summary(runs, expected)


def _expected_at(traces_dir: Path) -> dict[tuple[str, str, int], dict[str, str]]:
    return {(r["workload"], r["sc_policy"], int(r["seed"])): r for r in _authors_rows(traces_dir)}


def _authors_rows(traces_dir: Path) -> list[dict[str, str]]:
    """The authors' cached rows (``read_expected``), in the file's order; none when the
    traces hold no such file."""
    try:
        return read_expected(traces_dir)
    except FileNotFoundError:
        return []


def _summary(
    runs: Sequence[Run], expected: dict[tuple[str, str, int], dict[str, str]]
) -> dict[str, object]:
    results: list[dict[str, object]] = []
    groups: dict[tuple[str, str], list[tuple[float | None, float | None]]] = {}
    for run in runs:
        ours = run.columns().get(130)
        row = run.row()
        key = (str(row["workload"]), str(row["sc_policy"]), run.seed)
        theirs_row = None if run.subsample else expected.get(key)  # full-trace figures
        theirs = float(theirs_row["130"]) if theirs_row and theirs_row.get("130") else None
        results.append(
            {
                "workload": run.workload,
                "policy": run.policy,
                "seed": run.seed,
                "pods": len(run.arrived),
                "alloc_130": ours,
                "authors_130": theirs,
                "seconds": round(run.seconds, 2),
                "evictions": run.evictions,
                "subsample": run.subsample is not None,
            }
        )
        groups.setdefault((run.workload, run.policy), []).append((ours, theirs))
    means = []
    for (workload, policy), pairs in groups.items():
        ours_all = [o for o, _ in pairs if o is not None]
        theirs_all = [t for _, t in pairs if t is not None]
        means.append(
            {
                "workload": workload,
                "policy": policy,
                "seeds": len(pairs),
                "alloc_130_mean": round(mean(ours_all), 2) if ours_all else None,
                "authors_130_mean": round(mean(theirs_all), 2) if theirs_all else None,
            }
        )
    summary: dict[str, object] = {"runs": results, "means": means}
    sub = next((run.subsample for run in runs if run.subsample), None)
    if sub is not None:
        summary = {"subsample": asdict(sub), "note": sub.describe(), **summary}
    return summary


def _chart(runs: Sequence[Run], traces_dir: Path, workload: str) -> str:
    """GPU allocation ratio vs arrived load: ours (solid) and the authors' mean (dashed)."""
    canvas = Canvas(width=900, height=420)
    x, y = _axes(canvas)
    subsample = next((run.subsample for run in runs if run.subsample), None)
    expected = [] if subsample else _authors_rows(traces_dir)  # a subsample is not comparable
    legend: list[tuple[str, str]] = []
    policies = list(dict.fromkeys(run.policy for run in runs if run.workload == workload))
    for i, policy in enumerate(policies):
        stroke = color(i)
        ours = [r.columns() for r in runs if r.workload == workload and r.policy == policy]
        theirs = _theirs(expected, workload, policy)
        _curves(canvas, x, y, ours, theirs, stroke)
        legend.append((f"{policy} (dashed: authors)" if theirs else policy, stroke))
    canvas.legend(legend)
    return canvas.render(_title(workload, subsample))


def _title(workload: str, subsample: Subsample | None) -> str:
    """The chart's title (escaped for SVG), naming the subsample when the runs are one."""
    title = f"GPU allocation vs arrived load, openb {esc(workload)}"
    if subsample is not None:
        title += f" ({esc(subsample.describe().split(';')[0])})"
    return title


def _axes(canvas: Canvas) -> tuple[Scale, Scale]:
    """Draws the chart's axes (arrived load 0..130 %, allocation 0..100 %, ticked and
    labelled) and returns their scales, x then y."""
    x, y = canvas.xscale(0, 130), canvas.yscale(0, 100)
    canvas.axes(
        x,
        y,
        [(v, f"{v:g}") for v in nice_ticks(0, 130)],
        [(v, f"{v:g}") for v in nice_ticks(0, 100)],
        xlabel="arrived GPU request (% of cluster GPUs)",
        ylabel="GPU allocation (%)",
    )
    return x, y


def _theirs(
    expected: Sequence[dict[str, str]], workload: str, policy: str
) -> list[dict[int, float]]:
    """The authors' curves for ``workload`` under ``policy``, one per row of ``expected``
    (in its order): column k's value per k they give a value for."""
    label = POLICIES[policy]
    return [
        {int(k): float(v) for k, v in row.items() if k.isdigit() and v}
        for row in expected
        if row["workload"] == f"openb_pod_list_{workload}" and row["sc_policy"] == label
    ]


def _curves(
    canvas: Canvas,
    x: Scale,
    y: Scale,
    ours: Sequence[dict[int, float]],
    theirs: Sequence[dict[int, float]],
    stroke: str,
) -> None:
    """Draws one policy's curves in ``stroke``: the mean of ``ours`` solid, then the mean
    of ``theirs`` dashed when there are any."""
    _line(canvas, x, y, [_mean_curve(ours)], stroke, dash=None)
    if theirs:
        _line(canvas, x, y, [_mean_curve(theirs)], stroke, dash="5 4")


def _mean_curve(curves: Sequence[dict[int, float]]) -> dict[int, float]:
    out: dict[int, float] = {}
    for k in STEPS:
        values = [c[k] for c in curves if k in c]
        if values:
            out[k] = float(np.mean(values))
    return out


def _line(
    canvas: Canvas,
    x: Scale,
    y: Scale,
    curves: Sequence[dict[int, float]],
    stroke: str,
    *,
    dash: str | None,
) -> None:
    for curve in curves:
        if not curve:
            continue
        keys = sorted(curve)
        points = " ".join(f"{x.at(k):.1f},{y.at(curve[k]):.1f}" for k in keys)
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        canvas.raw(
            f'<polyline points="{points}" fill="none" stroke="{stroke}" '
            f'stroke-width="1.6"{dashing}/>'
        )
