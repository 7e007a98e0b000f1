"""The buddy cell allocator under any sequence of binds and releases.

Bound cells never overlap, no virtual cluster holds more cells of a type than it is
guaranteed, an unbound guarantee can always be bound (buddy allocation never strands
one), and releasing every binding merges the free list back to the initial one.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.cells import NodeCells, derive_levels
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import preset
from phalanx.engine.plugins.hived.buddy import SPLIT, CellAllocator
from phalanx.engine.plugins.hived.celltree import CellTree
from phalanx.engine.snapshot import Snapshot

from .world import suite_settings

DGX1 = derive_levels(8, preset("dgx1-v100"), "dgx1")  # gpu, nvlink quad, node
BOX = derive_levels(4, preset("pcie-4gpu"), "box")  # gpu, pcie pair, node
OWNERS = ("vc-a", "vc-b", "vc-c")


def _tree(racks: int, loose: int, boxes: int) -> CellTree:
    nodes = [
        Node(
            name=f"r{r}-{i}",
            capacity=Resources.of({"gpu": 8}),
            cells=NodeCells(levels=DGX1, above=(("rack", f"rack-{r}"),)),
        )
        for r in range(racks)
        for i in range(2)
    ]
    nodes += [
        Node(name=f"d{i}", capacity=Resources.of({"gpu": 8}), cells=NodeCells(levels=DGX1))
        for i in range(loose)
    ]
    nodes += [
        Node(name=f"b{i}", capacity=Resources.of({"gpu": 4}), cells=NodeCells(levels=BOX))
        for i in range(boxes)
    ]
    return CellTree(Snapshot.build(nodes=nodes))


@st.composite
def _cases(draw: st.DrawFn) -> tuple[CellTree, dict[str, dict[int, int]], list[tuple[int, int]]]:
    tree = _tree(draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(st.integers(1, 2)))
    types = len(tree.types)
    # guarantees: cells asked one at a time, kept while they all still fit
    probe = CellAllocator(tree, {})
    counts = [0] * types
    for top in tree.tops:
        counts[tree.ctype[top]] += 1
    demand = [0] * types
    guarantees: dict[str, dict[int, int]] = {owner: {} for owner in OWNERS}
    asks = st.lists(st.tuples(st.sampled_from(OWNERS), st.integers(0, 9)), min_size=1, max_size=16)
    for owner, pick in draw(asks):
        t = pick % types
        demand[t] += 1
        if probe.feasible(counts, demand):
            guarantees[owner][t] = guarantees[owner].get(t, 0) + 1
        else:
            demand[t] -= 1
    ops = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 99)), min_size=1, max_size=40))
    return tree, guarantees, ops


def _check(tree: CellTree, alloc: CellAllocator) -> None:
    seen: set[int] = set()
    for cell in alloc.bound:
        flat = set(tree.flat(cell).tolist())
        assert not flat & seen, f"{tree.describe(cell)} overlaps another bound cell"
        seen |= flat
        parent = tree.parent[cell]
        while parent >= 0:  # what holds a bound cell is split, never free nor bound
            assert alloc.state[parent] == SPLIT
            parent = tree.parent[parent]
    owned = np.flatnonzero(alloc.gpu_owner >= 0)
    assert set(owned.tolist()) == seen
    for owner in alloc.owners:
        for t, count in alloc.held[owner].items():
            assert 0 <= count <= alloc.guarantee[owner].get(t, 0)
    for t, free in enumerate(alloc.free):
        for cell in free:
            assert tree.ctype[cell] == t
            assert not set(tree.flat(cell).tolist()) & seen, "a free cell holds a bound GPU"
    assert alloc.feasible(), "an unbound guarantee can no longer be bound"


@suite_settings(150)
@given(case=_cases())
def test_buddy_allocation_never_overlaps_never_overdraws_and_merges_back(
    case: tuple[CellTree, dict[str, dict[int, int]], list[tuple[int, int]]],
) -> None:
    tree, guarantees, ops = case
    alloc = CellAllocator(tree, guarantees)
    initial = [set(f) for f in alloc.free]
    zero = lambda cells: np.zeros(len(cells))  # noqa: E731
    for op, pick in ops:
        if op < 4:  # bind one more cell of a guaranteed type
            owner = OWNERS[pick % len(OWNERS)]
            wanted = sorted(t for t in guarantees[owner] if alloc.unbound(owner, t) > 0)
            if not wanted:
                continue
            t = wanted[pick % len(wanted)]
            cell = alloc.choose(owner, t, zero)
            assert cell is not None, "buddy allocation stranded a guaranteed cell"
            alloc.bind(cell, owner)
        elif alloc.bound:
            alloc.release(sorted(alloc.bound)[pick % len(alloc.bound)])
        _check(tree, alloc)
    for cell in sorted(alloc.bound):
        alloc.release(cell)
    assert alloc.free == initial
    assert alloc.region.all() and (alloc.gpu_owner == -1).all()
