"""Cells: HiveD's hierarchy of GPU groups, and the guarantees virtual clusters hold in them.

A cell is a group of GPUs that is always handed out whole: one GPU (level 1), the GPUs
behind one PCIe switch or on one NVLink island, one socket, one node, or several nodes
(a rack). The cells of a node form a chain of levels, each level's cells being unions
of whole cells of the level below, all of one size. A cell type names a level (for
example ``dgx1-v100-nvlink``: 4 NVLinked V100s); a virtual cluster's guarantee is a
count of whole cells of a type (``CellGuarantee``).

Guarantees: a ``NodeCells`` is consistent (checked on construction): its first level
has one cell per GPU, its last one cell with every GPU, and every level partitions the
node's GPUs into equal cells that are unions of cells of the level below; type names
are distinct. ``derive_levels`` is deterministic: ties break on the lower GPU index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.domain.topology import GpuTopology, LinkLevel

#: What a derived level is called, by the link that holds its cells together (best first).
_LINK_LEVELS: Final = (
    (LinkLevel.NVLINK, "nvlink"),
    (LinkLevel.PIX, "pcie"),
    (LinkLevel.PXB, "pcie-tree"),
    (LinkLevel.PHB, "host-bridge"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CellLevel:
    """One level of a node's cell chain: its type and the GPU indexes of each of its cells."""

    type: str
    cells: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        """GPUs per cell."""
        return len(self.cells[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCells:
    """Where a node sits in the cell hierarchy.

    ``levels`` run from the GPU level (one cell per GPU) to the node level (one cell
    holding every GPU); a one-GPU node has a single level. ``above`` names the
    multi-node cells holding the node, lowest first, as (type, cell name): nodes that
    name the same cell form it together.
    """

    levels: tuple[CellLevel, ...]
    above: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.levels:
            raise InvalidInput("no levels", field="cells", fix="give at least the node level")
        count = sum(len(cell) for cell in self.levels[0].cells)
        below: tuple[tuple[int, ...], ...] | None = None
        for level in self.levels:
            _check_level(level, count, below)
            below = level.cells
        if self.levels[0].size != 1 or len(self.levels[-1].cells) != 1:
            raise InvalidInput(
                "the first level must have one cell per GPU and the last one cell",
                field="cells.levels",
                fix="start the chain at the GPU level and end it at the node level",
            )
        names = [level.type for level in self.levels] + [t for t, _ in self.above]
        if len(set(names)) != len(names):
            raise InvalidInput(
                f"cell types {names} repeat", field="cells", fix="give every level its own type"
            )

    @property
    def node_type(self) -> str:
        """The type of the node-level cell."""
        return self.levels[-1].type


def _check_level(level: CellLevel, count: int, below: tuple[tuple[int, ...], ...] | None) -> None:
    where = f"cells[{level.type}]"
    if not level.cells or len({len(cell) for cell in level.cells}) != 1:
        raise InvalidInput(
            "cells of one level must all have the same number of GPUs",
            field=where,
            fix="split the GPUs into equal cells",
        )
    gpus = sorted(g for cell in level.cells for g in cell)
    if gpus != list(range(count)):
        raise InvalidInput(
            f"the cells hold GPUs {gpus}, not each of 0..{count - 1} once",
            field=where,
            fix="put every GPU of the node in exactly one cell of each level",
        )
    if below is not None:
        parts = {g: cell for cell in below for g in cell}
        for cell in level.cells:
            if any(not set(parts[g]) <= set(cell) for g in cell):
                raise InvalidInput(
                    f"cell {cell} is not a union of cells of the level below",
                    field=where,
                    fix="make every cell a union of whole cells of the level below",
                )
        if level.size <= len(below[0]):
            raise InvalidInput(
                "a level must have bigger cells than the level below",
                field=where,
                fix="list the levels from the GPU up to the node",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class CellGuarantee:
    """A virtual cluster's guarantee: ``count`` whole cells of type ``type``."""

    type: str
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise InvalidInput(
                f"count {self.count} of {self.type} cells", field="cells", fix="use 1 or more"
            )


def sequential_levels(chain: Sequence[tuple[str, int]]) -> tuple[CellLevel, ...]:
    """Levels from an explicit chain: ``(type, children)`` from the GPU level (whose
    children count is 1) up to the node level; cells are consecutive GPU indexes."""
    count = math.prod(children for _, children in chain)
    levels = []
    size = 1
    for name, children in chain:
        size *= children
        cells = tuple(tuple(range(i, i + size)) for i in range(0, count, size))
        levels.append(CellLevel(type=name, cells=cells))
    return tuple(levels)


def derive_levels(count: int, topology: GpuTopology | None, prefix: str) -> tuple[CellLevel, ...]:
    """The cell chain of a node with ``count`` GPUs, read from its topology when known.

    Types are ``<prefix>-gpu``, then the levels the topology shows, then
    ``<prefix>-node``. A level groups GPUs that reach each other over NVLink
    (``nvlink``), one PCIe switch (``pcie``), several (``pcie-tree``), one host bridge
    (``host-bridge``), or share a NUMA node (``socket``); it is kept when its cells
    are equal, bigger than the level below's and unions of them, and smaller than the
    node. DGX-1: gpu -> nvlink (4) -> node (8); a two-socket PCIe box with two GPUs per
    switch: gpu -> pcie (2) -> node (4); DGX A100: gpu -> socket (4) -> node (8).
    """
    if count < 1:
        raise InvalidInput(f"{count} GPUs", field="gpus", fix="cells need at least one GPU")
    node = CellLevel(type=f"{prefix}-node", cells=(tuple(range(count)),))
    if count == 1:
        return (node,)
    chain = [CellLevel(type=f"{prefix}-gpu", cells=tuple((g,) for g in range(count)))]
    if topology is not None and topology.count == count:
        for name, cells in _candidates(topology):
            size = len(cells[0])
            below = chain[-1].cells
            if len(below[0]) < size < count and _coarsens(cells, below):
                chain.append(CellLevel(type=f"{prefix}-{name}", cells=cells))
    chain.append(node)
    return tuple(chain)


def _candidates(topology: GpuTopology) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """Uniform GPU partitions the topology shows, smallest cells first, one per shape."""
    found: list[tuple[str, tuple[tuple[int, ...], ...]]] = []
    for level, name in _LINK_LEVELS:
        found.append((name, _cliques(topology, level)))
    found.append(("socket", tuple(topology.numa_domains().values())))
    seen: set[tuple[tuple[int, ...], ...]] = set()
    uniform = []
    for name, cells in found:
        if cells not in seen and len({len(c) for c in cells}) == 1:
            seen.add(cells)
            uniform.append((name, cells))
    return sorted(uniform, key=lambda item: len(item[1][0]))  # stable: best link first


def _cliques(topology: GpuTopology, level: LinkLevel) -> tuple[tuple[int, ...], ...]:
    """GPUs grouped so that every pair in a group links at ``level`` or better (greedy,
    each GPU joins the first group it fits, lowest index first)."""
    groups: list[list[int]] = []
    for gpu in range(topology.count):
        for group in groups:
            if all(topology.links[gpu][other].level <= level for other in group):
                group.append(gpu)
                break
        else:
            groups.append([gpu])
    return tuple(tuple(group) for group in groups)


def _coarsens(cells: tuple[tuple[int, ...], ...], below: tuple[tuple[int, ...], ...]) -> bool:
    part = {g: frozenset(cell) for cell in below for g in cell}
    return all(part[g] <= frozenset(cell) for cell in cells for g in cell)
