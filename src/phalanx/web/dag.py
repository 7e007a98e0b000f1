"""A pipeline run's DAG laid out for an SVG picture: steps as boxes in columns by
topological level, edges as straight lines from a box's right side to the next's left.

Guarantees: ``layout`` is a pure function of its input; the same steps in the same order
give the same coordinates. A step's level is 0 without dependencies, else one more than
its deepest dependency's, so every edge goes left to right. Within a column, steps are
ordered by the mean row of their dependencies (fewer crossings), ties by the order they
were given in. A dependency on a step not given is ignored, and so is one that closes a
cycle (the API's graphs have none; the picture must not hang on a bad one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

#: A box's size and the gaps between columns and rows, in SVG user units (pixels).
BOX_WIDTH: Final = 190
BOX_HEIGHT: Final = 58
GAP_X: Final = 56
GAP_Y: Final = 18
MARGIN: Final = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Box:
    """One step at (``x``, ``y``), its top left corner: column ``level``, row ``row``."""

    name: str
    level: int
    row: int
    x: int
    y: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """The edge from ``source`` (its right side) to ``target`` (its left side)."""

    source: str
    target: str
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Every box (in the order given) and edge, and the picture's size."""

    boxes: tuple[Box, ...]
    lines: tuple[Line, ...]
    width: int
    height: int


def levels(steps: Sequence[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """Each step's column: 0 without (known) dependencies, else 1 + its deepest one's."""
    after: Mapping[str, Sequence[str]] = dict(steps)
    found: dict[str, int] = {}
    visiting: set[str] = set()

    def level(name: str) -> int:
        if name in found:
            return found[name]
        visiting.add(name)
        deps = [d for d in after[name] if d in after and d not in visiting]
        found[name] = 1 + max((level(d) for d in deps), default=-1)
        visiting.discard(name)
        return found[name]

    for name, _ in steps:
        level(name)
    return found


def layout(steps: Sequence[tuple[str, Sequence[str]]]) -> Layout:
    """The boxes and lines of ``steps``: (name, names of the steps it depends on) each,
    in graph order; a name given twice counts once (its first dependencies)."""
    unique: dict[str, Sequence[str]] = {}
    for name, deps in steps:
        unique.setdefault(name, deps)
    given = list(unique.items())
    column = levels(given)
    order = {name: i for i, (name, _) in enumerate(given)}
    rows: dict[str, int] = {}
    for depth in range(max(column.values(), default=-1) + 1):
        here = [name for name, _ in given if column[name] == depth]

        def key(name: str) -> tuple[float, int]:
            above = [rows[d] for d in unique[name] if d in rows]
            return (sum(above) / len(above) if above else 0.0, order[name])

        for row, name in enumerate(sorted(here, key=key)):
            rows[name] = row
    boxes = tuple(
        Box(
            name=name,
            level=column[name],
            row=rows[name],
            x=MARGIN + column[name] * (BOX_WIDTH + GAP_X),
            y=MARGIN + rows[name] * (BOX_HEIGHT + GAP_Y),
        )
        for name, _ in given
    )
    placed = {box.name: box for box in boxes}
    lines = tuple(
        Line(
            source=dep,
            target=box.name,
            x1=placed[dep].x + BOX_WIDTH,
            y1=placed[dep].y + BOX_HEIGHT // 2,
            x2=box.x,
            y2=box.y + BOX_HEIGHT // 2,
        )
        for box in boxes
        for dep in dict.fromkeys(unique[box.name])
        if dep in placed and column[dep] < box.level
    )
    columns = max((b.level for b in boxes), default=-1) + 1
    height = max((b.row for b in boxes), default=-1) + 1
    return Layout(
        boxes=boxes,
        lines=lines,
        width=2 * MARGIN + columns * BOX_WIDTH + max(0, columns - 1) * GAP_X,
        height=2 * MARGIN + height * BOX_HEIGHT + max(0, height - 1) * GAP_Y,
    )
