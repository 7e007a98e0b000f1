"""A tuning's trials on a chart, drawn on the server as SVG (no chart library in the page).

A pure function of a ``TuningView``: one point per trial that was measured, x its cost
and y what the objective holds it to at the highest rate it was measured at (the p99
latency in ms for ``cheapest``, with the SLO drawn as a line; the requests/s for
``throughputPerCost``). The axes run from 0 to the largest value shown (the SLO
included; a p99 axis to at most ``SLO_SPAN`` times the SLO, slower trials drawn on its
top edge), so the picture's proportions are the data's; the best trial is marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any, Final

from phalanx.client import TrialView, TuningView

#: The SVG's drawing box (the page scales it) and the room left for the axes' labels.
WIDTH: Final = 480
HEIGHT: Final = 240
_LEFT: Final = 48.0
_BOTTOM: Final = 28.0
_TOP: Final = 10.0
_RIGHT: Final = 12.0
#: The p99 axis reaches this many times the SLO at most; slower trials sit on its top.
SLO_SPAN: Final = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One measured trial: where it is drawn, and what its tooltip says."""

    number: int
    x: float
    y: float
    kind: str  # "best", "feasible" or "missed"
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialChart:
    """The chart: its points, the SLO line's height (None: no SLO drawn), the axes'
    titles and their largest values."""

    points: tuple[Point, ...]
    slo_y: float | None
    x_title: str
    y_title: str
    x_max: float
    y_max: float
    width: int = WIDTH
    height: int = HEIGHT
    left: float = _LEFT
    bottom: float = HEIGHT - _BOTTOM
    right: float = WIDTH - _RIGHT
    top: float = _TOP


def trial_chart(tuning: TuningView) -> TrialChart:
    """``tuning``'s measured trials as a chart (see the module docstring)."""
    objective: Mapping[str, Any] = tuning.document.get("spec", {}).get("objective", {})
    cheapest = objective.get("goal", "cheapest") == "cheapest"
    slo = objective.get("latencyP99")
    slo_ms = float(slo) * 1000 if cheapest and isinstance(slo, int | float) else None
    measured = [
        (trial, _y(trial, cheapest))
        for trial in tuning.trials
        if trial.cost is not None and trial.metrics and _y(trial, cheapest) is not None
    ]
    x_max = max([t.cost or 0.0 for t, _ in measured] + [1e-9])
    y_max = max([y or 0.0 for _, y in measured] + [slo_ms or 0.0, 1e-9])
    if slo_ms is not None:  # far over the SLO is drawn at the top: the boundary stays readable
        y_max = min(y_max, SLO_SPAN * slo_ms)
    best = None if tuning.best is None else tuning.best.number
    span_x, span_y = WIDTH - _RIGHT - _LEFT, HEIGHT - _BOTTOM - _TOP

    def px(value: float) -> float:
        return round(_LEFT + value / x_max * span_x, 1)

    def py(value: float) -> float:
        return round(HEIGHT - _BOTTOM - value / y_max * span_y, 1)

    points = tuple(
        Point(
            number=trial.number,
            x=px(trial.cost or 0.0),
            y=py(min(y or 0.0, y_max)),
            kind="best" if trial.number == best else "feasible" if trial.feasible else "missed",
            label=_label(trial, y or 0.0, cheapest),
        )
        for trial, y in measured
    )
    return TrialChart(
        points=points,
        slo_y=None if slo_ms is None else py(slo_ms),
        x_title="cost",
        y_title="p99 latency (ms)"
        if cheapest
        else "samples/s"
        if objective.get("goal") == "samplesPerGpu"
        else "requests/s",
        x_max=x_max,
        y_max=y_max,
    )


def _y(trial: TrialView, cheapest: bool) -> float | None:
    """The trial's p99 in ms at its last rate (cheapest), or its best throughput."""
    if cheapest:
        p99 = trial.metrics[-1].get("p99")
        return float(p99) * 1000 if isinstance(p99, int | float) else None
    rates = [m.get("throughput") for m in trial.metrics]
    found = [float(r) for r in rates if isinstance(r, int | float)]
    return max(found) if found else None


def _label(trial: TrialView, y: float, cheapest: bool) -> str:
    params = " ".join(f"{key}={value}" for key, value in trial.params.items())
    shown = f"p99 {y:.1f} ms" if cheapest else f"{y:.1f} requests/s"
    return f"trial {trial.number}: {params}; {shown}, cost {trial.cost:.3g}"


def svg_of(chart: TrialChart, *, title: str) -> str:
    """``chart`` as a standalone SVG document (the console draws the same in its page):
    what ``bench/tuning_grid.py --chart`` writes for the documentation."""
    colours = {"best": "#2f6fde", "feasible": "#2e9d5b", "missed": "#c0392b"}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {chart.width} {chart.height}" '
        f'width="{chart.width * 1.5:g}" height="{chart.height * 1.5:g}" role="img">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{chart.width}" height="{chart.height}" fill="#fbfcfd"/>',
        f'<line x1="{chart.left}" y1="{chart.bottom}" x2="{chart.right}" y2="{chart.bottom}" '
        'stroke="#8a94a0"/>',
        f'<line x1="{chart.left}" y1="{chart.bottom}" x2="{chart.left}" y2="{chart.top}" '
        'stroke="#8a94a0"/>',
        f'<text x="{chart.right}" y="{chart.height - 4}" text-anchor="end" font-size="11" '
        f'font-family="sans-serif">{escape(chart.x_title)} (0 to {chart.x_max:.3g})</text>',
        f'<text x="4" y="{chart.top + 8}" font-size="11" font-family="sans-serif">'
        f"{escape(chart.y_title)}, 0 to {chart.y_max:.3g}</text>",
    ]
    if chart.slo_y is not None:
        parts.append(
            f'<line x1="{chart.left}" y1="{chart.slo_y}" x2="{chart.right}" y2="{chart.slo_y}" '
            'stroke="#e08a00" stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
    for point in chart.points:
        radius = 6 if point.kind == "best" else 4
        parts.append(
            f'<circle cx="{point.x}" cy="{point.y}" r="{radius}" fill="{colours[point.kind]}" '
            f'opacity="0.8"><title>{escape(point.label)}</title></circle>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
