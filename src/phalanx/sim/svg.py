"""Drawing primitives for the simulator's report: scales, ticks, down-sampling, inline SVG.

Guarantees:

- every string that reaches the markup goes through ``esc`` (names come from traces);
- the same input gives the same bytes (no clock, no randomness, coordinates rounded to
  0.1 px);
- a down-sampled series never has more points than asked for, keeps its first and last
  point and, per pixel-wide bucket, its lowest and highest value, so a step chart keeps
  its shape and its peaks;
- a ``Canvas`` draws without any external script, style sheet or font file.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

#: Colours for queues and runs, in order (Tableau 10, then two more); ``color`` cycles past them.
PALETTE: Final = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#17becf", "#8c564b",
)  # fmt: skip
#: Human ticks for a logarithmic time axis: (seconds, label).
LOG_TIME_TICKS: Final = (
    (1.0, "1 s"), (10.0, "10 s"), (60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"),
    (36000.0, "10 h"), (86400.0, "1 d"), (864000.0, "10 d"), (8640000.0, "100 d"),
)  # fmt: skip
_UNITS: Final = ((86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"))
#: Presentation attributes, so that a chart opened on its own (no page CSS) draws as in
#: the report: a white background, a hollow plot box, light grid lines, dark text.
FONT: Final = "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
FONT_SIZE: Final = 11
GRID: Final = "#e6e6e6"
BOX: Final = "#999"
#: Legend labels longer than this are cut (whole in their tooltip).
LEGEND_CHARS: Final = 40


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """A generous estimate of ``text``'s width in px in a sans-serif font of ``size`` px:
    0.62 em per character (wide letters and digits), 0.3 em for narrow ones."""
    narrow = sum(ch in "il.,:;'|!()[] " for ch in text)
    return size * (0.62 * (len(text) - narrow) + 0.3 * narrow)


def esc(text: object) -> str:
    """``text`` as HTML/SVG text or attribute value: ``<>&"'`` escaped."""
    return html.escape(str(text), quote=True)


def color(index: int) -> str:
    """The ``index``-th colour: the palette, then hues spaced by the golden angle."""
    if index < len(PALETTE):
        return PALETTE[index]
    return f"hsl({(index * 137.508) % 360:.0f},55%,50%)"


def time_unit(span: float) -> tuple[float, str]:
    """(seconds per unit, unit name) for an axis spanning ``span`` seconds: d, h, min or s."""
    for seconds, name in _UNITS:
        if span >= 2 * seconds:
            return seconds, name
    return 1.0, "s"


def fmt_duration(seconds: float) -> str:
    """``seconds`` in the largest unit (d, h, min, s) it is at least one of; 3 significant digits."""
    size, name = next(((s, n) for s, n in _UNITS if abs(seconds) >= s), (1.0, "s"))
    return f"{seconds / size:.3g} {name}"


def fmt_number(value: float) -> str:
    """A tick label: up to 4 significant digits, no trailing zeros, thousands separated."""
    if value != 0 and abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round values (steps of 1, 2, 2.5 or 5 x 10^k) covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [round(k * step, 10) for k in range(first, last + 1)]


def time_ticks(lo: float, hi: float) -> tuple[list[tuple[float, str]], str]:
    """Ticks for a linear time axis in seconds, labelled in one unit; and that unit."""
    size, name = time_unit(hi - lo)
    return [(v * size, fmt_number(v)) for v in nice_ticks(lo / size, hi / size, 6)], name


def log_time_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """The human ticks (1 s, 10 s, 1 min ... 100 d) that fall in [lo, hi]."""
    return [(v, label) for v, label in LOG_TIME_TICKS if lo * 0.999 <= v <= hi * 1.001]


@dataclass(frozen=True, slots=True)
class Scale:
    """Maps data values in [lo, hi] to pixels in [start, end], linearly or logarithmically."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def __call__(self, values: npt.ArrayLike) -> Array:
        """Pixel positions of ``values`` (clamped to the domain)."""
        v = np.clip(np.asarray(values, dtype=np.float64), self.lo, self.hi)
        lo, hi = self.lo, self.hi
        if self.log:
            v, lo, hi = np.log10(v), math.log10(lo), math.log10(hi)
        span = (hi - lo) or 1.0
        return np.asarray(self.start + (v - lo) / span * (self.end - self.start))

    def at(self, value: float) -> float:
        """Pixel position of one value."""
        return float(self(value))


def downsample_steps(t: Array, v: Array, max_points: int) -> tuple[Array, Array]:
    """At most ``max_points`` points of the step function (t, v), t non-decreasing.

    The time range is cut into ``max_points // 4`` buckets; each keeps its first, last,
    lowest and highest point (M4), so peaks and the step shape survive.
    """
    if t.size <= max_points:
        return t, v
    buckets = max(max_points // 4, 1)
    span = float(t[-1] - t[0]) or 1.0
    b = np.minimum(((t - t[0]) / span * buckets).astype(np.int64), buckets - 1)
    order = np.lexsort((v, b))
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], t.size] - 1
    sb = b[order]
    low = np.flatnonzero(np.r_[True, sb[1:] != sb[:-1]])
    high = np.r_[low[1:], sb.size] - 1
    keep = np.unique(np.concatenate([starts, ends, order[low], order[high]]))
    return t[keep], v[keep]


def cdf(values: Sequence[float] | Array, max_points: int) -> tuple[Array, Array]:
    """The empirical CDF of ``values`` as (sorted value, fraction <= it), at most ``max_points``.

    When thinned, points are taken at evenly spaced ranks and always include the
    smallest and the largest value.
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    if x.size == 0:
        return x, x
    ranks = np.arange(x.size)
    if x.size > max_points:
        ranks = np.unique(np.linspace(0, x.size - 1, max(max_points, 2)).round().astype(np.int64))
    return x[ranks], (ranks + 1.0) / x.size


def bucket_means(t: Array, v: Array, edges: Array) -> Array:
    """Time-weighted mean of the step function (t, v) (0 before t[0]) over each [edges[i], edges[i+1])."""
    if t.size == 0:
        return np.zeros(max(edges.size - 1, 0))
    area = np.r_[0.0, np.cumsum(v[:-1] * np.diff(t))]
    k = np.searchsorted(t, edges, side="right") - 1
    kk = np.maximum(k, 0)
    integral = np.where(k < 0, 0.0, area[kk] + v[kk] * (edges - t[kk]))
    width = np.diff(edges)
    return np.asarray(np.diff(integral) / np.where(width > 0, width, 1.0))


def _n(value: float) -> str:
    return f"{value:.1f}"


@dataclass(slots=True)
class Canvas:
    """One chart: a plot box with margins, collecting SVG elements; ``render`` returns the markup."""

    width: int = 860
    height: int = 300
    left: int = 64
    right: int = 170
    top: int = 14
    bottom: int = 44
    parts: list[str] = field(default_factory=list)

    def xscale(self, lo: float, hi: float, *, log: bool = False) -> Scale:
        """A horizontal scale over the plot box."""
        return Scale(lo, hi if hi > lo else lo + 1.0, self.left, self.width - self.right, log)

    def yscale(self, lo: float, hi: float) -> Scale:
        """A vertical scale over the plot box (``lo`` at the bottom)."""
        return Scale(lo, hi if hi > lo else lo + 1.0, self.height - self.bottom, self.top)

    def axes(
        self,
        x: Scale,
        y: Scale,
        xticks: Sequence[tuple[float, str]],
        yticks: Sequence[tuple[float, str]],
        *,
        xlabel: str,
        ylabel: str,
    ) -> None:
        """Grid lines, tick labels, the box and the axis titles."""
        bottom, top = y.start, y.end
        for value, label in xticks:
            px = _n(x.at(value))
            self.parts.append(
                f'<line x1="{px}" x2="{px}" y1="{_n(top)}" y2="{_n(bottom)}" class="grid" '
                f'stroke="{GRID}"/>'
                f'<text x="{px}" y="{_n(bottom + 16)}" text-anchor="middle">{esc(label)}</text>'
            )
        for value, label in yticks:
            py = _n(y.at(value))
            self.parts.append(
                f'<line x1="{_n(x.start)}" x2="{_n(x.end)}" y1="{py}" y2="{py}" class="grid" '
                f'stroke="{GRID}"/>'
                f'<text x="{_n(x.start - 6)}" y="{py}" dy="4" text-anchor="end">{esc(label)}</text>'
            )
        self.parts.append(
            f'<rect x="{_n(x.start)}" y="{_n(top)}" width="{_n(x.end - x.start)}" '
            f'height="{_n(bottom - top)}" class="box" fill="none" stroke="{BOX}"/>'
            f'<text x="{_n((x.start + x.end) / 2)}" y="{self.height - 6}" '
            f'text-anchor="middle">{esc(xlabel)}</text>'
            f'<text transform="translate(14 {_n((top + bottom) / 2)}) rotate(-90)" '
            f'text-anchor="middle">{esc(ylabel)}</text>'
        )

    def steps(
        self, x: Scale, y: Scale, xs: Array, ys: Array, *, stroke: str, until: float | None = None
    ) -> None:
        """A step line through (xs, ys): flat until the next x, then up or down; held to ``until``."""
        if xs.size == 0:
            return
        px, py = x(xs), y(ys)
        path = [f"M{_n(px[0])} {_n(py[0])}"]
        path += [f"H{_n(a)}V{_n(b)}" for a, b in zip(px[1:], py[1:], strict=True)]
        if until is not None:
            path.append(f"H{_n(x.at(until))}")
        self.parts.append(
            f'<path d="{"".join(path)}" fill="none" stroke="{stroke}" stroke-width="1.6" '
            f'data-n="{xs.size}"/>'
        )

    def band(self, x: Scale, y: Scale, edges: Array, low: Array, high: Array, *, fill: str) -> None:
        """A stacked band between two per-bucket step lines over bucket ``edges``."""
        px, lo_y, hi_y = x(edges), y(low), y(high)
        path = [f"M{_n(px[0])} {_n(hi_y[0])}"]
        path += [
            f"H{_n(px[i + 1])}V{_n(hi_y[min(i + 1, hi_y.size - 1)])}" for i in range(hi_y.size)
        ]
        path.append(f"V{_n(lo_y[-1])}")
        path += [f"H{_n(px[i])}V{_n(lo_y[max(i - 1, 0)])}" for i in range(lo_y.size - 1, -1, -1)]
        self.parts.append(
            f'<path d="{"".join(path)}Z" fill="{fill}" fill-opacity="0.85" stroke="none" '
            f'data-n="{edges.size}"/>'
        )

    def hline(self, y_px: float, x: Scale, *, label: str, dash: str = "5 4") -> None:
        """A dashed horizontal reference line with a label at its right end."""
        self.parts.append(
            f'<line x1="{_n(x.start)}" x2="{_n(x.end)}" y1="{_n(y_px)}" y2="{_n(y_px)}" '
            f'stroke="#333" stroke-dasharray="{dash}"/>'
            f'<text x="{_n(x.end - 4)}" y="{_n(y_px - 4)}" text-anchor="end">{esc(label)}</text>'
        )

    def rect(
        self,
        x0: float,
        y0: float,
        w: float,
        h: float,
        *,
        fill: str,
        tip: str = "",
        opacity: float = 1,
    ) -> None:
        """A filled rectangle in pixels (at least 0.8 px wide), with an optional tooltip."""
        title = f"<title>{esc(tip)}</title>" if tip else ""
        alpha = f' fill-opacity="{opacity:g}"' if opacity < 1 else ""
        self.parts.append(
            f'<rect x="{_n(x0)}" y="{_n(y0)}" width="{_n(max(w, 0.8))}" height="{_n(h)}" '
            f'fill="{fill}"{alpha}>{title}</rect>'
        )

    def raw(self, markup: str) -> None:
        """Append markup the caller built (and escaped) itself."""
        self.parts.append(markup)

    def legend(self, items: Sequence[tuple[str, str]], *, limit: int = 16) -> None:
        """(label, colour) swatches in the right margin; past ``limit`` a "+N more" line.

        The margin (and the chart with it) widens to the longest label, up to
        ``LEGEND_CHARS`` characters (longer ones are cut, whole in their tooltip); the
        plot box keeps its place.
        """
        x = self.width - self.right + 12
        shown = [label if len(label) <= LEGEND_CHARS else label[: LEGEND_CHARS - 1] + "…"
                 for label, _ in items[:limit]]  # fmt: skip
        needed = 15 + max((text_width(label) for label in shown), default=0.0) + 20
        if needed > self.right - 12:
            grow = math.ceil(needed - (self.right - 12))
            self.right += grow
            self.width += grow
        for i, ((label, fill), short) in enumerate(zip(items[:limit], shown, strict=True)):
            y = self.top + 6 + 16 * i
            self.parts.append(
                f'<rect x="{x}" y="{y}" width="10" height="10" fill="{fill}"/>'
                f'<text x="{x + 15}" y="{y + 9}">{esc(short)}<title>{esc(label)}</title></text>'
            )
        if len(items) > limit:
            y = self.top + 6 + 16 * limit
            self.parts.append(f'<text x="{x}" y="{y + 9}">+{len(items) - limit} more</text>')

    def render(self, label: str) -> str:
        """The ``<svg>`` element, sized by its viewBox so it scales with the page."""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" font-family="{FONT}" '
            f'font-size="{FONT_SIZE}" fill="#222" role="img" aria-label="{esc(label)}">'
            f'<rect width="100%" height="100%" fill="#fff"/>{"".join(self.parts)}</svg>'
        )
