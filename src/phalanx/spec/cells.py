"""Cell types of a Cluster document and the cells each node gets (HiveD's physicalCluster).

A ``cellTypes`` entry names a cell made of ``childCellNumber`` cells of
``childCellType``; a child type that no entry defines is the GPU level. The entry
flagged ``isNodeLevel`` is one node; entries above it span several nodes. A node group
names its top type in ``cellType``: consecutive nodes of the group form its
multi-node cells, and consecutive GPUs its in-node cells::

    cellTypes:
    - {name: v100-quad, childCellType: v100, childCellNumber: 4}
    - {name: dgx1-node, childCellType: v100-quad, childCellNumber: 2, isNodeLevel: true}
    - {name: dgx1-rack, childCellType: dgx1-node, childCellNumber: 4}
    nodeGroups:
    - {name: dgx, count: 8, cellType: dgx1-rack, ...}   # racks dgx-0..3 and dgx-4..7

A group with GPUs and no ``cellType`` gets the chain its topology shows
(``derive_levels``), its types named after the topology preset or, for a matrix or
no topology, after the group: ``dgx1-v100-gpu``, ``dgx1-v100-nvlink``,
``dgx1-v100-node``.

Guarantees: ``check_cell_types`` refuses, naming the entry and the fix, a repeated
name, a type that is the child of two types, a cycle, a chain with no node level or
two, and a group whose GPU count or node count does not match its chain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Final

from pydantic import Field

from phalanx.domain.cells import NodeCells, sequential_levels
from phalanx.spec.common import Loc, Name, SpecModel, located

#: Most children one cell type may have; a guard against hostile input.
MAX_CHILDREN: Final = 1024


class CellTypeSpec(SpecModel):
    """One entry of ``cellTypes``: a cell made of ``childCellNumber`` child cells."""

    name: Name
    """The cell type's name, used by nodeGroups' cellType and queues' cells."""
    child_cell_type: Name
    """The type of the cells it is made of (a GPU model at the bottom)."""
    child_cell_number: Annotated[int, Field(ge=2, le=MAX_CHILDREN)]
    """How many child cells make one of it."""
    is_node_level: bool = False
    """Whether one cell of this type is exactly one node."""


def check_cell_types(types: Sequence[CellTypeSpec]) -> dict[str, CellTypeSpec]:
    """The entries by name, once every chain is sound (see the module's guarantees)."""
    by_name: dict[str, CellTypeSpec] = {}
    parent_of: dict[str, str] = {}
    for i, entry in enumerate(types):
        if entry.name in by_name:
            raise located(
                f"cell type {entry.name!r} is defined twice",
                "give every cell type its own name",
                at=("cellTypes", i, "name"),
            )
        by_name[entry.name] = entry
        child = entry.child_cell_type
        if child in parent_of:
            raise located(
                f"{child!r} is the child of both {parent_of[child]!r} and {entry.name!r}",
                "give each level of a chain its own type",
                at=("cellTypes", i, "childCellType"),
            )
        parent_of[child] = entry.name
    for i, entry in enumerate(types):
        chain = _chain(by_name, entry.name, ("cellTypes", i))
        node_levels = [name for name, _ in chain if name in by_name and by_name[name].is_node_level]
        if len(node_levels) > 1:
            raise located(
                f"the chain below {entry.name!r} has two node levels: {', '.join(node_levels)}",
                "flag one type per chain with isNodeLevel",
                at=("cellTypes", i, "isNodeLevel"),
            )
    return by_name


def _chain(by_name: Mapping[str, CellTypeSpec], top: str, at: Loc) -> list[tuple[str, int]]:
    """``(type, children)`` from the GPU level (children 1) up to ``top``."""
    chain: list[tuple[str, int]] = []
    name = top
    while name in by_name:
        if any(name == seen for seen, _ in chain):
            raise located(
                f"cell type {name!r} contains itself", "make the chain end at a GPU type", at=at
            )
        entry = by_name[name]
        chain.append((name, entry.child_cell_number))
        name = entry.child_cell_type
    chain.append((name, 1))
    return chain[::-1]


def group_cells(
    group: str,
    top: str,
    by_name: Mapping[str, CellTypeSpec],
    *,
    gpus: int,
    nodes: int,
    at: Loc = ("cellType",),
) -> list[NodeCells]:
    """The cells of each node of a group whose top cell type is ``top`` (``at`` locates
    the group's ``cellType`` in errors)."""
    if top not in by_name:
        known = ", ".join(sorted(by_name)) or "none are defined"
        raise located(
            f"cell type {top!r} is not in spec.cellTypes",
            f"name one of them ({known}) or add it",
            at=at,
        )
    chain = _chain(by_name, top, at)
    flags = [by_name[name].is_node_level if name in by_name else False for name, _ in chain]
    if not any(flags):
        raise located(
            f"the chain under {top!r} has no node level",
            "flag the type that is one node with isNodeLevel: true",
            at=at,
        )
    node_at = flags.index(True)
    inside, above = chain[: node_at + 1], chain[node_at + 1 :]
    per_node = math.prod(children for _, children in inside)
    if per_node != gpus:
        raise located(
            f"a {chain[node_at][0]} cell holds {per_node} GPUs but the nodes have {gpus}",
            "make childCellNumber times the levels below match gpus.count",
            at=at,
        )
    span = math.prod(children for _, children in above)
    if nodes % span:
        raise located(
            f"a {top} cell spans {span} nodes, which does not divide count {nodes}",
            f"use a count that is a multiple of {span}",
            at=at,
        )
    levels = sequential_levels(inside)
    spans = []
    size = 1
    for name, children in above:
        size *= children
        spans.append((name, size))
    return [
        NodeCells(
            levels=levels,
            above=tuple((name, f"{group}/{name}-{index // size}") for name, size in spans),
        )
        for index in range(nodes)
    ]
