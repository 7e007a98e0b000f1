"""The admin view's charts of the server's recent metrics, as SVG polylines drawn on the
server (no chart library in the page).

A pure function of a ``HistoryView`` and ``now``: each chart spans the last ``window``
seconds up to ``now``, x by time, y from 0 to the series' peak in the window. A counter
(sessions' jobs started, tasks evicted) reads 0 in a bucket the server recorded nothing
in; a gauge or a latency has no value there, and its line breaks across the gap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.client import HistoryBucketView, HistoryView

#: Seconds of history a chart shows.
WINDOW: Final = 3600.0
#: The SVG's drawing box (the page scales it).
WIDTH: Final = 300
HEIGHT: Final = 48
_PAD: Final = 2.0

Read = Callable[[HistoryBucketView], float | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One line: what it reads from a bucket, how its values are written, and whether a
    silent bucket counts as 0 (a counter) or as no value (a gauge)."""

    key: str
    title: str
    read: Read
    unit: str = ""
    scale: float = 1.0  # shown value = read value x scale
    counter: bool = False


SERIES: Final = (
    Series(
        key="latency-mean",
        title="session latency, mean",
        read=lambda b: b.session_mean if b.sessions else None,
        unit="ms",
        scale=1000.0,
    ),
    Series(
        key="latency-max",
        title="session latency, max",
        read=lambda b: b.session_max if b.sessions else None,
        unit="ms",
        scale=1000.0,
    ),
    Series(key="started", title="jobs started", read=lambda b: b.started, counter=True),
    Series(key="evicted", title="tasks evicted", read=lambda b: b.evicted, counter=True),
    Series(key="pending", title="pending jobs", read=lambda b: b.pending),
    Series(
        key="gpu-ratio",
        title="GPUs allocated",
        read=lambda b: b.gpu_ratio,
        unit="%",
        scale=100.0,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """One drawn series: ``lines`` are SVG ``points`` attributes (one per unbroken run),
    ``latest`` the newest value, ``peak`` the top of the y scale, ``total`` the sum over
    the window (of a counter: events in the window), ``points`` how many values."""

    key: str
    title: str
    unit: str
    lines: tuple[str, ...]
    latest: float | None
    peak: float
    total: float
    points: int


def _values(
    series: Series, buckets: Sequence[HistoryBucketView], *, start: float, width: float
) -> list[tuple[float, float | None]]:
    """(time, value) per bucket slot from ``start``; counters fill silent slots with 0."""
    by_slot = {round((b.start - start) / width): b for b in buckets}
    slots = range(max(by_slot, default=-1) + 1) if series.counter else sorted(by_slot)
    out: list[tuple[float, float | None]] = []
    for slot in slots:
        if slot < 0:
            continue
        bucket = by_slot.get(slot)
        raw = series.read(bucket) if bucket is not None else 0.0
        out.append((start + slot * width, None if raw is None else raw * series.scale))
    return out


def _lines(
    values: Sequence[tuple[float, float | None]],
    *,
    start: float,
    span: float,
    peak: float,
    width: float,
) -> tuple[str, ...]:
    """The polylines' points; a line breaks at a value missing or a bucket skipped."""
    lines: list[str] = []
    current: list[str] = []
    previous: float | None = None
    for t, value in values:
        if value is None or (previous is not None and t - previous > 1.5 * width):
            if current:
                lines.append(_run(current))
            current = []
        if value is None:
            previous = None
            continue
        x = (t - start) / span * WIDTH if span > 0 else 0.0
        y = HEIGHT - _PAD - (value / peak if peak > 0 else 0.0) * (HEIGHT - 2 * _PAD)
        current.append(f"{x:.1f},{y:.1f}")
        previous = t
    if current:
        lines.append(_run(current))
    return tuple(lines)


def _run(points: list[str]) -> str:
    """A polyline's points; a lone point is drawn as a short dash (a polyline needs two)."""
    if len(points) == 1:
        x, y = points[0].split(",")
        points = [points[0], f"{float(x) + 1.5:.1f},{y}"]
    return " ".join(points)


def charts(history: HistoryView, *, now: float, window: float = WINDOW) -> list[Chart]:
    """A chart per ``SERIES`` over the ``window`` seconds before ``now``."""
    width = history.bucket_seconds
    start = (now - window) // width * width
    kept = [b for b in history.buckets if b.start >= start]
    drawn = []
    for series in SERIES:
        values = _values(series, kept, start=start, width=width)
        present = [v for _, v in values if v is not None]
        peak = max(present, default=0.0)
        drawn.append(
            Chart(
                key=series.key,
                title=series.title,
                unit=series.unit,
                lines=_lines(values, start=start, span=now - start, peak=peak, width=width),
                latest=present[-1] if present else None,
                peak=peak,
                total=sum(present),
                points=len(present),
            )
        )
    return drawn
