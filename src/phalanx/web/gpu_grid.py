"""The GPUs page's grid: a row per node, a cell per card, each cell coloured by the
card's utilisation at its node's latest reading.

A pure function of the API's ``NodeView`` list and ``now``; nothing here asks the API.
What a cell says is what the API gave the visitor: the percent busy, memory used of the
card's total, and the tasks given the card (the names the visitor may see: their own,
or every one for an admin; the others as a count). The colour runs from ``PALE`` (0%)
to ``STRONG`` (100%) in equal steps; a card never read is hatched grey (``unread``),
never coloured as idle; a card whose node's reading is older than ``STALE`` seconds
keeps its colour but is marked stale; a cordoned card is marked apart (its reason, who
cordoned it and since when in its title), whatever its utilisation. A node whose GPUs
are not read at all (``gpu_readings_absent``) says why on a line of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.client import GpuView, NodeView
from phalanx.web.formatting import duration, gib, utc

#: The colours of 0% and 100% utilisation, as RGB.
PALE: Final = (238, 243, 251)
STRONG: Final = (20, 60, 150)
#: From this utilisation on, a cell's text is white (dark text on the paler shades).
WHITE_TEXT_FROM: Final = 55.0
#: A reading older than this many seconds is stale (its node stopped sending them).
STALE: Final = 60.0
#: Task names a cell shows; the rest are counted.
NAMES_SHOWN: Final = 2
#: The utilisations the legend shows a swatch of.
LEGEND: Final = (0, 25, 50, 75, 100)


def heat(utilisation: float) -> str:
    """The colour of ``utilisation`` percent (clamped to 0..100) as a CSS ``rgb()``."""
    share = min(100.0, max(0.0, utilisation)) / 100.0
    red, green, blue = (round(p + (s - p) * share) for p, s in zip(PALE, STRONG, strict=True))
    return f"rgb({red}, {green}, {blue})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One card. ``utilisation`` None: never read. ``colour`` and ``ink`` are its
    background and text colours ("" for an unread card: hatched by its class)."""

    index: int
    model: str
    utilisation: float | None
    percent: str
    memory: str  # "12.5 / 80.0 GiB"; "" unread
    colour: str
    ink: str
    stale: bool
    allocated: float  # 0..1 of the card given to tasks
    tasks: tuple[str, ...]  # the names shown (at most NAMES_SHOWN)
    more: int  # visible names not shown
    others: int  # other users' tasks on it
    cordoned: str | None  # the reason; None: it takes work
    cordoned_by: str
    title: str

    @property
    def state(self) -> str:
        """``cordoned``, ``unread``, ``stale`` or ``read``: the cell's class."""
        if self.cordoned is not None:
            return "cordoned"
        if self.utilisation is None:
            return "unread"
        return "stale" if self.stale else "read"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One node: its cards, and why they are not read (None: they are)."""

    node: str
    status: str  # the node's: Ready, NotReady, Cordoned, Draining, Drained
    model: str  # its cards' model ("mixed" for several, "" unnamed)
    cells: tuple[Cell, ...]
    absent: str | None
    read_at: float | None
    mean: float | None  # mean utilisation of its read cards


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """The grid in figures: cards in all, read, with tasks and cordoned; the mean
    utilisation of the read ones (None: none read)."""

    nodes: int
    cards: int
    read: int
    allocated: int
    cordoned: int
    mean: float | None
    without_gpus: int  # nodes with no card (not drawn)


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """The rows of the nodes with cards, in the API's order, and the figures."""

    rows: tuple[Row, ...]
    summary: Summary


def _title(node: str, gpu: GpuView, *, now: float, stale: bool) -> str:
    parts = [f"{node} GPU {gpu.index}" + (f" {gpu.model}" if gpu.model else "")]
    if gpu.utilisation is None or gpu.read_at is None:
        parts.append("not read")
    else:
        figures = f"{gpu.utilisation:.0f}% busy"
        if gpu.memory_used is not None and gpu.memory_total:
            figures += f", memory {gib(gpu.memory_used)} / {gib(gpu.memory_total)} GiB"
        if gpu.temperature is not None:
            figures += f", {gpu.temperature:.0f} C"
        if gpu.power is not None:
            figures += f", {gpu.power:.0f} W"
        parts.append(figures)
        if gpu.xid:
            parts.append(f"last XID error {gpu.xid}")
        ago = duration(gpu.read_at, now)
        parts.append(f"read {ago} ago" + (" (stale: no reading since)" if stale else ""))
    parts.append(f"{gpu.used:.0%} allocated")
    if gpu.tasks or gpu.other_tasks:
        held = ", ".join(gpu.tasks)
        if gpu.other_tasks:
            held += ("; " if held else "") + f"{gpu.other_tasks} task(s) of other users"
        parts.append(f"tasks: {held}")
    if gpu.cordoned is not None:
        since = f" since {utc(gpu.cordoned_since)} UTC" if gpu.cordoned_since else ""
        parts.append(f"cordoned by {gpu.cordoned_by or 'an admin'}{since}: {gpu.cordoned}")
    return "\n".join(parts)


def cell(node: str, gpu: GpuView, *, now: float) -> Cell:
    """One card of ``node`` as the grid draws it."""
    read = gpu.utilisation is not None
    stale = read and gpu.read_at is not None and now - gpu.read_at > STALE
    memory = ""
    if read and gpu.memory_used is not None and gpu.memory_total:
        memory = f"{gib(gpu.memory_used)} / {gib(gpu.memory_total)} GiB"
    utilisation = gpu.utilisation
    return Cell(
        index=gpu.index,
        model=gpu.model,
        utilisation=utilisation,
        percent="-" if utilisation is None else f"{utilisation:.0f}%",
        memory=memory,
        colour="" if utilisation is None else heat(utilisation),
        ink="" if utilisation is None else "#fff" if utilisation >= WHITE_TEXT_FROM else "#1d232b",
        stale=stale,
        allocated=gpu.used,
        tasks=tuple(gpu.tasks[:NAMES_SHOWN]),
        more=max(0, len(gpu.tasks) - NAMES_SHOWN),
        others=gpu.other_tasks,
        cordoned=gpu.cordoned,
        cordoned_by=gpu.cordoned_by or "",
        title=_title(node, gpu, now=now, stale=stale),
    )


def row(node: NodeView, *, now: float) -> Row:
    """One node with cards as the grid draws it."""
    cells = tuple(cell(node.name, gpu, now=now) for gpu in node.gpus)
    models = {gpu.model for gpu in node.gpus if gpu.model}
    read = [c.utilisation for c in cells if c.utilisation is not None]
    times = [gpu.read_at for gpu in node.gpus if gpu.read_at is not None]
    return Row(
        node=node.name,
        status=node.status,
        model=models.pop() if len(models) == 1 else "mixed" if models else "",
        cells=cells,
        absent=node.gpu_readings_absent,
        read_at=max(times, default=None),
        mean=sum(read) / len(read) if read else None,
    )


def grid(nodes: Sequence[NodeView], *, now: float) -> Grid:
    """The nodes with cards, in the API's order (the cluster's), and their figures."""
    rows = tuple(row(node, now=now) for node in nodes if node.gpus)
    cells = [c for r in rows for c in r.cells]
    read = [c.utilisation for c in cells if c.utilisation is not None]
    return Grid(
        rows=rows,
        summary=Summary(
            nodes=len(rows),
            cards=len(cells),
            read=len(read),
            allocated=sum(1 for c in cells if c.allocated > 0 or c.tasks or c.others),
            cordoned=sum(1 for c in cells if c.cordoned is not None),
            mean=sum(read) / len(read) if read else None,
            without_gpus=len(nodes) - len(rows),
        ),
    )
