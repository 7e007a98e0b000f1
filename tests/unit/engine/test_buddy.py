"""The cell tree and the buddy allocator: split on bind, merge on release, guarantees kept."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.domain.cells import NodeCells, derive_levels
from phalanx.domain.errors import EngineInvariantError, InvalidInput
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import preset
from phalanx.engine.plugins.hived.buddy import CellAllocator
from phalanx.engine.plugins.hived.celltree import CellTree
from phalanx.engine.snapshot import Snapshot

LEVELS = derive_levels(8, preset("dgx1-v100"), "dgx1")


def dgx(name: str, rack: str | None = None) -> Node:
    above = (("rack", rack),) if rack else ()
    return Node(
        name=name,
        capacity=Resources.of({"gpu": 8}),
        cells=NodeCells(levels=LEVELS, above=above),
    )


def tree_of(*nodes: Node) -> CellTree:
    return CellTree(Snapshot.build(nodes=nodes))


def zero(cells: np.ndarray) -> np.ndarray:
    return np.zeros(len(cells))


def cell(tree: CellTree, name: str) -> int:
    return tree.names.index(name)


def named(tree: CellTree, cells: set[int]) -> list[str]:
    return sorted(tree.describe(c) for c in cells)


def test_the_tree_names_cells_and_links_them() -> None:
    tree = tree_of(dgx("b", "r0"), dgx("a", "r0"))
    assert [tree.types[t].name for t in tree.chain(tree.type_index["dgx1-gpu"])] == [
        "rack",
        "dgx1-node",
        "dgx1-nvlink",
        "dgx1-gpu",
    ]
    assert tree.names[:4] == ["r0", "a", "a/0-3", "a/4-7"]  # ids in name order, top-down
    rack = cell(tree, "r0")
    assert tree.types[tree.ctype[rack]].size == 16 and tree.tops == (rack,)
    assert tree.descendants(rack, tree.type_index["dgx1-nvlink"]) == [
        cell(tree, n) for n in ("a/0-3", "a/4-7", "b/0-3", "b/4-7")
    ]


def test_binding_a_quad_splits_its_node_and_the_next_quad_takes_the_buddy() -> None:
    tree = tree_of(dgx("n0"), dgx("n1"))
    quad, node = tree.type_index["dgx1-nvlink"], tree.type_index["dgx1-node"]
    alloc = CellAllocator(tree, {"a": {quad: 2}})
    first = alloc.choose("a", quad, zero)
    assert first is not None and tree.describe(first) == "n0/0-3"  # ties: name order
    alloc.bind(first, "a")
    assert named(tree, alloc.free[node]) == ["n1"]
    assert named(tree, alloc.free[quad]) == ["n0/4-7"]
    second = alloc.choose("a", quad, zero)
    assert second is not None and tree.describe(second) == "n0/4-7"  # not a split of n1
    alloc.bind(second, "a")
    assert alloc.choose("a", quad, zero) is None  # its guarantee is used up
    with pytest.raises(EngineInvariantError, match="over its guarantee"):
        alloc.bind(cell(tree, "n1/0-3"), "a")


def test_releasing_merges_buddies_back_into_their_parent() -> None:
    tree = tree_of(dgx("n0", "r0"), dgx("n1", "r0"))
    quad = tree.type_index["dgx1-nvlink"]
    alloc = CellAllocator(tree, {"a": {quad: 2}})
    initial = [set(f) for f in alloc.free]
    for name in ("n1/4-7", "n0/0-3"):
        alloc.bind(cell(tree, name), "a")
    assert named(tree, alloc.free[tree.type_index["dgx1-node"]]) == []
    alloc.release(cell(tree, "n1/4-7"))
    assert named(tree, alloc.free[tree.type_index["dgx1-node"]]) == ["n1"]
    alloc.release(cell(tree, "n0/0-3"))
    assert alloc.free == initial and alloc.region.all()
    assert (alloc.gpu_owner == -1).all()


def test_the_cost_picks_among_free_cells_then_the_name() -> None:
    tree = tree_of(dgx("n0"), dgx("n1"), dgx("n2"))
    node = tree.type_index["dgx1-node"]
    alloc = CellAllocator(tree, {"a": {node: 1}})
    busy = cell(tree, "n0")
    chosen = alloc.choose("a", node, lambda cells: np.where(cells == busy, 1.0, 0.0))
    assert chosen is not None and tree.describe(chosen) == "n1"


def test_a_split_that_would_break_another_guarantee_is_never_chosen() -> None:
    tree = tree_of(dgx("n0", "r0"), dgx("n1", "r0"))
    rack, quad = tree.type_index["rack"], tree.type_index["dgx1-nvlink"]
    alloc = CellAllocator(tree, {"a": {rack: 1}, "b": {quad: 1}})
    assert not alloc.feasible()  # more than the cells hold: the plugin refuses such queues
    assert alloc.choose("b", quad, zero) is None
    fair = CellAllocator(tree, {"a": {tree.type_index["dgx1-node"]: 1}, "b": {quad: 1}})
    chosen = fair.choose("b", quad, zero)
    assert chosen is not None and fair.feasible_after(chosen)


def test_a_type_seen_with_two_shapes_is_refused() -> None:
    other = Node(
        name="x",
        capacity=Resources.of({"gpu": 4}),
        cells=NodeCells(levels=derive_levels(4, None, "dgx1")),  # dgx1-node of 4 GPUs
    )
    with pytest.raises(InvalidInput, match="dgx1-node cell holds"):
        tree_of(dgx("n0"), other)
