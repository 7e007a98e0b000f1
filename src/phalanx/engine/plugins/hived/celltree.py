"""The physical cells of a snapshot's nodes as one tree of integer ids (the hived plugin's).

Guarantees: built from the nodes' ``cells`` alone (nodes without cells are not in the
tree); ids are given in name order: multi-node cells by name, then each node (by
name) top-down, each level by first GPU, so comparing ids breaks ties on names.
Every type has one size, one child type and one number of children, and types form
disjoint chains; anything else is refused with ``InvalidInput`` naming the node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Node
from phalanx.engine.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class CellType:
    """One type: GPUs per cell, its child type (-1 at the GPU level) and children per cell."""

    name: str
    size: int
    child: int
    children: int
    multi_node: bool


class _Types:
    """Type registry that refuses a type seen with two shapes or under two parents."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.types: list[CellType] = []
        self.parent: dict[int, int] = {}

    def add(self, where: str, name: str, child: str | None, children: int, multi: bool) -> int:
        child_id = -1 if child is None else self.index[child]
        size = children * (1 if child is None else self.types[child_id].size)
        shape = CellType(name, size, child_id, children, multi)
        known = self.index.get(name)
        if known is None:
            known = self.index[name] = len(self.types)
            self.types.append(shape)
        elif self.types[known] != shape:
            raise InvalidInput(
                f"a {name} cell holds {children} {child} cells here but "
                f"{self.types[known].children} elsewhere",
                field=where,
                fix="give cells of different shapes different types",
            )
        if child_id >= 0 and self.parent.setdefault(child_id, known) != known:
            raise InvalidInput(
                f"{child} cells sit in {name} cells here but in "
                f"{self.types[self.parent[child_id]].name} cells elsewhere",
                field=where,
                fix="give each level of a chain its own type",
            )
        return known


class CellTree:
    """Every physical cell: its type, parent, children, node and GPUs."""

    def __init__(self, snapshot: Snapshot) -> None:
        nodes = snapshot.nodes
        self.width = int(snapshot.cards.count.max(initial=0))
        registry = _Types()
        with_cells = sorted(
            (i for i, node in enumerate(nodes) if node.cells is not None),
            key=lambda i: nodes[i].name,
        )
        for i in with_cells:
            _register(registry, nodes[i])
        self.ctype: list[int] = []
        self.parent: list[int] = []
        self.children: list[list[int]] = []
        self.node: list[int] = []
        self.gpus: list[tuple[int, ...]] = []
        self.names: list[str] = []
        self.node_cell: NDArray[np.intp] = np.full(len(nodes), -1, dtype=np.intp)
        self.leaf: NDArray[np.intp] = np.full((len(nodes), max(self.width, 1)), -1, np.intp)
        above = self._multi_node_cells(registry, nodes, with_cells)
        self.types: tuple[CellType, ...] = tuple(registry.types)
        self.type_index = registry.index
        self.parent_type = [registry.parent.get(t, -1) for t in range(len(self.types))]
        for i in with_cells:
            self._node_cells(i, nodes[i], above)
        self._check_children()
        self.count = len(self.ctype)
        self.tops: tuple[int, ...] = tuple(c for c in range(self.count) if self.parent[c] < 0)
        kinds = np.array(self.ctype, dtype=np.intp)
        self.kind: NDArray[np.intp] = kinds  # the type of each cell
        self.parents: NDArray[np.intp] = np.array(self.parent, dtype=np.intp)
        self.nodes: NDArray[np.intp] = np.array(self.node, dtype=np.intp)
        #: cells of each type, in id order; ``row[cell]``: the cell's place among them
        self.of_type: list[NDArray[np.intp]] = [
            np.flatnonzero(kinds == t) for t in range(len(self.types))
        ]
        self.row: NDArray[np.intp] = np.zeros(self.count, dtype=np.intp)
        for cells in self.of_type:
            self.row[cells] = np.arange(len(cells))
        self._flat: dict[int, NDArray[np.intp]] = {}
        self._members: dict[int, NDArray[np.intp]] = {}
        self._groups: dict[int, tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]] = {}

    # -- building -----------------------------------------------------------------------

    def _new(self, ctype: int, parent: int, node: int, gpus: tuple[int, ...], name: str) -> int:
        cell = len(self.ctype)
        self.ctype.append(ctype)
        self.parent.append(parent)
        self.children.append([])
        self.node.append(node)
        self.gpus.append(gpus)
        self.names.append(name)
        if parent >= 0:
            self.children[parent].append(cell)
        return cell

    def _multi_node_cells(
        self, registry: _Types, nodes: tuple[Node, ...], with_cells: list[int]
    ) -> dict[str, int]:
        """Multi-node cells by name (parents before children), their types registered."""
        parent_of: dict[str, str | None] = {}
        type_of: dict[str, str] = {}
        kids: dict[str, set[str]] = {}
        child_type: dict[str, str] = {}
        for i in with_cells:
            cells = nodes[i].cells
            assert cells is not None
            below, below_type = nodes[i].name, cells.node_type
            for k, (ctype, name) in enumerate(cells.above):
                upper = cells.above[k + 1][1] if k + 1 < len(cells.above) else None
                if (
                    parent_of.setdefault(name, upper) != upper
                    or type_of.setdefault(name, ctype) != ctype
                    or child_type.setdefault(name, below_type) != below_type
                ):
                    raise InvalidInput(
                        f"node {nodes[i].name} places cell {name!r} otherwise than other nodes do",
                        field=f"nodes.{nodes[i].name}.cells.above",
                        fix="give every node of a multi-node cell the same cells above it",
                    )
                kids.setdefault(name, set()).add(below)
                below, below_type = name, ctype
        for name in sorted(kids, key=lambda n: _depth(n, parent_of), reverse=True):
            registry.add(f"cells.{name}", type_of[name], child_type[name], len(kids[name]), True)
        ids: dict[str, int] = {}

        def make(name: str) -> int:
            if name not in ids:
                upper = parent_of[name]
                parent = -1 if upper is None else make(upper)
                ids[name] = self._new(registry.index[type_of[name]], parent, -1, (), name)
            return ids[name]

        for name in sorted(parent_of):
            make(name)
        return ids

    def _node_cells(self, index: int, node: Node, above: dict[str, int]) -> None:
        cells = node.cells
        assert cells is not None
        top = len(cells.levels) - 1
        parent = above[cells.above[0][1]] if cells.above else -1
        owner = dict.fromkeys(cells.levels[top].cells[0], parent)
        for depth in range(top, -1, -1):
            level = cells.levels[depth]
            ctype = self.type_index[level.type]
            placed: dict[int, int] = {}
            for gpus in sorted(level.cells):
                name = node.name if depth == top else f"{node.name}/{_span(gpus)}"
                cell = self._new(ctype, owner[gpus[0]], index, tuple(gpus), name)
                if depth == top:
                    self.node_cell[index] = cell
                placed.update(dict.fromkeys(gpus, cell))
            owner = placed
        for gpu, cell in owner.items():
            self.leaf[index, gpu] = cell

    def _check_children(self) -> None:
        for cell, kids in enumerate(self.children):
            shape = self.types[self.ctype[cell]]
            if kids and len(kids) != shape.children:
                raise InvalidInput(
                    f"cell {self.names[cell]!r} has {len(kids)} child cells; other "
                    f"{shape.name} cells have {shape.children}",
                    field=f"cells.{self.names[cell]}",
                    fix="give every cell of one type the same number of children",
                )

    # -- questions ----------------------------------------------------------------------

    def chain(self, t: int) -> list[int]:
        """The types of ``t``'s chain, top first."""
        top = t
        while self.parent_type[top] >= 0:
            top = self.parent_type[top]
        found = [top]
        while self.types[found[-1]].child >= 0:
            found.append(self.types[found[-1]].child)
        return found

    def up(self, cells: NDArray[np.intp], t: int) -> NDArray[np.intp]:
        """The cell of type ``t`` holding each of ``cells`` (all of one type below ``t``)."""
        found = cells
        for _ in range(len(self.types)):
            if not len(found) or self.kind[found[0]] == t:
                break
            found = self.parents[found]
        return found

    def groups(self, t: int) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
        """Cells of type ``t`` that have a parent, grouped by parent for ``reduceat``:
        (those cells sorted by parent, where each parent's run starts, the parents)."""
        found = self._groups.get(t)
        if found is None:
            cells = self.of_type[t]
            cells = cells[self.parents[cells] >= 0]
            cells = cells[np.argsort(self.parents[cells], kind="stable")]
            ups = self.parents[cells]
            starts = np.flatnonzero(np.r_[True, ups[1:] != ups[:-1]]) if len(ups) else ups
            found = self._groups[t] = (cells, starts, ups[starts] if len(ups) else ups)
        return found

    def ancestor(self, cell: int, t: int) -> int:
        """The cell of type ``t`` holding ``cell`` (itself included), or -1."""
        while cell >= 0 and self.ctype[cell] != t:
            cell = self.parent[cell]
        return cell

    def flat(self, cell: int) -> NDArray[np.intp]:
        """Indexes ``node * width + gpu`` of the cell's GPUs, ascending."""
        found = self._flat.get(cell)
        if found is None:
            if self.node[cell] >= 0:
                found = self.node[cell] * self.width + np.array(self.gpus[cell], dtype=np.intp)
            else:
                found = np.concatenate([self.flat(kid) for kid in self.children[cell]])
            self._flat[cell] = found
        return found

    def members(self, t: int) -> NDArray[np.intp]:
        """Flat GPU indexes (see ``flat``) of every cell of type ``t``: one row per cell, in
        ``of_type[t]`` order."""
        found = self._members.get(t)
        if found is None:
            cells = self.of_type[t]
            shape = self.types[t]
            if not len(cells):
                found = np.zeros((0, shape.size), dtype=np.intp)
            elif shape.multi_node:  # its children's rows, side by side
                kids = np.array([self.children[c] for c in cells.tolist()], dtype=np.intp)
                found = self.members(shape.child)[self.row[kids]].reshape(len(cells), -1)
            else:
                gpus = np.array([self.gpus[c] for c in cells.tolist()], dtype=np.intp)
                found = self.nodes[cells][:, None] * self.width + gpus
            self._members[t] = found
        return found

    def descendants(self, cell: int, t: int) -> list[int]:
        """Cells of type ``t`` inside ``cell`` (itself when of type ``t``), in id order."""
        found = [cell]
        while found and self.ctype[found[0]] != t:
            found = [kid for c in found for kid in self.children[c]]
        return found

    def describe(self, cell: int) -> str:
        """``dgx-0``, ``dgx-0/4-7`` (GPUs 4 to 7) or a multi-node cell's name."""
        return self.names[cell]


def _register(registry: _Types, node: Node) -> None:
    cells = node.cells
    assert cells is not None
    child: str | None = None
    for level in cells.levels:
        children = level.size // (
            1 if child is None else registry.types[registry.index[child]].size
        )
        registry.add(f"nodes.{node.name}.cells", level.type, child, children, False)
        child = level.type


def _depth(name: str, parent_of: dict[str, str | None]) -> int:
    depth = 0
    upper = parent_of[name]
    while upper is not None:
        depth, upper = depth + 1, parent_of[upper]
    return depth


def _span(gpus: tuple[int, ...]) -> str:
    if len(gpus) > 1 and gpus == tuple(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(str(g) for g in gpus)
