"""A job's use of its GPUs on its page: a chart drawn on the server as SVG (no chart
library in the page) and the summary line.

A pure function of a ``JobGpusView``. The chart has two panels over the same time axis,
from the first window's start to the last window's end: utilisation in percent (0 to
100: the mean over the job's card readings, and the busiest card's peak) and memory
(0 to the highest peak: the mean and the peak of all its cards together). A window is
a mean over its span, so each is drawn flat from its start to its end; the lines break
where no window covers more than ``GAP`` seconds (the job held no card: it waited,
was preempted, or its nodes were not read). While the job is marked idle
(``idle_since``) the span from the mark on is shaded and the mark drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.client import GpuUseView, JobGpusView
from phalanx.web.formatting import duration, gib, utc

#: The SVG's drawing box (the page scales it) and the room left for the labels.
WIDTH: Final = 640
HEIGHT: Final = 250
LEFT: Final = 56.0
RIGHT: Final = WIDTH - 12.0
#: Each panel's top and bottom (utilisation above, memory below), each titled above its
#: box; the time labels under them.
UTILISATION_BOX: Final = (20.0, 110.0)
MEMORY_BOX: Final = (138.0, 228.0)
#: Seconds between two windows beyond which the lines break.
GAP: Final = 90.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Panel:
    """One panel: its box, the top of its scale (and how that reads), and its lines
    (SVG ``points`` attributes, one per unbroken run) of the mean and the peak."""

    key: str  # "utilisation" or "memory"
    title: str
    top: float
    bottom: float
    scale: float  # the value at ``top``
    scale_label: str
    mean: tuple[str, ...]
    peak: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuChart:
    """The chart: its two panels, its time span and the idle mark's x (None: no mark)."""

    panels: tuple[Panel, Panel]
    start: float
    end: float
    windows: int
    idle_x: float | None
    width: int = WIDTH
    height: int = HEIGHT
    left: float = LEFT
    right: float = RIGHT

    @property
    def start_label(self) -> str:
        return f"{utc(self.start)} UTC"

    @property
    def span_label(self) -> str:
        """How long the chart spans (``12m05s``)."""
        return duration(self.start, self.end)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSummary:
    """The summary line's figures, written as people read them."""

    utilisation: str
    utilisation_peak: str
    memory: str
    memory_peak: str
    cards: int
    samples: int
    start: float
    end: float


def summary(view: JobGpusView) -> GpuSummary | None:
    """``view``'s use over the job's life so far (None before a first reading)."""
    use = view.summary
    if use is None:
        return None
    return GpuSummary(
        utilisation=f"{use.utilisation:.0f}%",
        utilisation_peak=f"{use.utilisation_peak:.0f}%",
        memory=f"{gib(use.memory)} GiB",
        memory_peak=f"{gib(use.memory_peak)} GiB",
        cards=use.cards,
        samples=use.samples,
        start=use.start,
        end=use.end,
    )


def _runs(windows: Sequence[GpuUseView]) -> list[list[GpuUseView]]:
    """The windows in time order, split where more than ``GAP`` seconds lie between two."""
    runs: list[list[GpuUseView]] = []
    for window in sorted(windows, key=lambda w: w.start):
        if runs and window.start - runs[-1][-1].end <= GAP:
            runs[-1].append(window)
        else:
            runs.append([window])
    return runs


def _lines(
    runs: list[list[GpuUseView]],
    read: Callable[[GpuUseView], float],
    *,
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> tuple[str, ...]:
    """Each run as a step line: every window flat from its start to its end."""
    lines = []
    for run in runs:
        points: list[str] = []
        for window in run:
            height = y(read(window))
            left, right = x(window.start), x(window.end)
            if right - left < 1.5:  # one reading: a short dash, so that it shows
                right = left + 1.5
            points += [f"{left:.1f},{height:.1f}", f"{right:.1f},{height:.1f}"]
        lines.append(" ".join(points))
    return tuple(lines)


def _panel(
    key: str,
    title: str,
    box: tuple[float, float],
    runs: list[list[GpuUseView]],
    reads: tuple[Callable[[GpuUseView], float], Callable[[GpuUseView], float]],
    *,
    scale: float,
    scale_label: str,
    x: Callable[[float], float],
) -> Panel:
    top, bottom = box

    def y(value: float) -> float:
        share = min(1.0, max(0.0, value / scale)) if scale > 0 else 0.0
        return bottom - share * (bottom - top)

    return Panel(
        key=key,
        title=title,
        top=top,
        bottom=bottom,
        scale=scale,
        scale_label=scale_label,
        mean=_lines(runs, reads[0], x=x, y=y),
        peak=_lines(runs, reads[1], x=x, y=y),
    )


def chart(view: JobGpusView) -> GpuChart | None:
    """``view``'s windows as a chart (see the module docstring); None without any."""
    if not view.windows:
        return None
    runs = _runs(view.windows)
    start = min(w.start for w in view.windows)
    end = max([w.end for w in view.windows] + [view.idle_since or start])
    span = end - start

    def x(t: float) -> float:
        share = (t - start) / span if span > 0 else 0.0
        return LEFT + share * (RIGHT - LEFT)

    memory_top = max(w.memory_peak for w in view.windows)
    utilisation = _panel(
        "utilisation",
        "utilisation",
        UTILISATION_BOX,
        runs,
        (lambda w: w.utilisation, lambda w: w.utilisation_peak),
        scale=100.0,
        scale_label="100%",
        x=x,
    )
    memory = _panel(
        "memory",
        "memory",
        MEMORY_BOX,
        runs,
        (lambda w: w.memory, lambda w: w.memory_peak),
        scale=memory_top,
        scale_label=f"{gib(memory_top)} GiB",
        x=x,
    )
    idle_x = None if view.idle_since is None else round(x(max(view.idle_since, start)), 1)
    return GpuChart(
        panels=(utilisation, memory),
        start=start,
        end=end,
        windows=len(view.windows),
        idle_x=idle_x,
    )
