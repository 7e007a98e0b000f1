"""Buddy cell allocation (HiveD's): virtual clusters' cells bound to whole physical cells.

Each owner (a virtual cluster) is guaranteed a count of cells per type. A binding ties
one of those cells to one physical cell of the type, taken whole.

Guarantees:

- bound cells never overlap: a cell is bound only when it is free or inside a free
  cell, and binding splits the free cell down to it (its buddies on the way become
  free cells of their own);
- release merges buddies: a cell whose siblings are all free makes its parent free
  again, so releasing every binding restores the initial free list (the top cells);
- an owner never holds more cells of a type than it is guaranteed (``bind`` refuses);
- ``choose`` follows the buddy rule (a free cell of the type, else a split of the
  smallest free higher cell), breaks ties on the caller's cost and then on the cell id
  (name order), and never returns a cell whose binding leaves some owner's remaining
  guarantee impossible to bind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import EngineInvariantError
from phalanx.engine.plugins.hived.celltree import CellTree

FREE, SPLIT, BOUND, INSIDE = 0, 1, 2, 3

#: Per cell (of the type asked for, or higher): the cost of binding it, or its cheapest
#: cell of that type (lower is better; inf: not wanted).
Cost = Callable[[NDArray[np.intp]], NDArray[np.float64]]


class CellAllocator:
    """Free list per type, bindings per owner, and each GPU's owner (-1: none)."""

    def __init__(self, tree: CellTree, guarantees: Mapping[str, Mapping[int, int]]) -> None:
        self.tree = tree
        self.owners = tuple(sorted(guarantees))
        self.guarantee = {o: dict(guarantees[o]) for o in self.owners}
        self.held: dict[str, dict[int, int]] = {o: {} for o in self.owners}
        self.state: NDArray[np.int8] = np.full(tree.count, INSIDE, dtype=np.int8)
        self.free: list[set[int]] = [set() for _ in tree.types]
        for cell in tree.tops:
            self.state[cell] = FREE
            self.free[tree.ctype[cell]].add(cell)
        self.bound: dict[int, str] = {}
        self.bound_by: dict[str, set[int]] = {o: set() for o in self.owners}
        #: cells that are free or inside a free cell
        self.region: NDArray[np.bool_] = np.ones(tree.count, dtype=np.bool_)
        #: owner (index into ``owners``) of the bound cell holding each flat GPU, -1: none
        self.gpu_owner: NDArray[np.intp] = np.full(
            len(tree.node_cell) * max(tree.width, 1), -1, dtype=np.intp
        )
        self.chains = [tree.chain(t) for t in range(len(tree.types)) if tree.parent_type[t] < 0]

    # -- questions ----------------------------------------------------------------------

    def unbound(self, owner: str, t: int) -> int:
        """Cells of type ``t`` the owner is guaranteed and has not bound."""
        return self.guarantee[owner].get(t, 0) - self.held[owner].get(t, 0)

    def free_ancestor(self, cell: int) -> int:
        """The free cell holding ``cell`` (itself included), or -1 when it is not free."""
        parent = self.tree.parent
        while cell >= 0:
            state = self.state[cell]
            if state == FREE:
                return cell
            if state != INSIDE:
                return -1
            cell = parent[cell]
        return -1

    def demand(self) -> list[int]:
        """Unbound guaranteed cells per type, summed over owners."""
        total = [0] * len(self.tree.types)
        for owner in self.owners:
            for t, count in self.guarantee[owner].items():
                total[t] += count - self.held[owner].get(t, 0)
        return total

    def feasible(self, counts: list[int] | None = None, demand: list[int] | None = None) -> bool:
        """Whether every unbound guaranteed cell can still be bound (greedy from the top
        of each chain: what a level does not need splits into the level below)."""
        counts = [len(f) for f in self.free] if counts is None else counts
        demand = self.demand() if demand is None else demand
        types = self.tree.types
        for chain in self.chains:
            carry = 0
            for t in chain:
                avail = counts[t] + carry
                if avail < demand[t]:
                    return False
                carry = (avail - demand[t]) * types[t].children
        return True

    def feasible_after(self, cell: int) -> bool:
        """Whether binding ``cell`` (free or inside a free cell) keeps ``feasible``."""
        tree = self.tree
        counts = [len(f) for f in self.free]
        demand = self.demand()
        top = self.free_ancestor(cell)
        counts[tree.ctype[top]] -= 1
        node = cell
        while node != top:
            counts[tree.ctype[node]] += len(tree.children[tree.parent[node]]) - 1
            node = tree.parent[node]
        demand[tree.ctype[cell]] -= 1
        return self.feasible(counts, demand)

    def choose(self, owner: str, t: int, cost: Cost) -> int | None:
        """The cell of type ``t`` to bind for ``owner`` by the buddy rule (see the module),
        among cells of finite ``cost``; None when the owner has none left or none fits."""
        if self.unbound(owner, t) <= 0:
            return None
        found = _cheapest(self.free[t], cost)
        if found is not None:
            return found
        chain = self.tree.chain(t)
        for h in reversed(chain[: chain.index(t)]):  # the smallest higher level first
            top = _cheapest(self.free[h], cost)
            if top is None:
                continue
            inner = _cheapest(self.tree.descendants(top, t), cost)
            assert inner is not None
            if self.feasible_after(inner):  # every split at one level changes counts alike
                return inner
        return None

    # -- changes ------------------------------------------------------------------------

    def bind(self, cell: int, owner: str) -> None:
        """Tie one of ``owner``'s cells of ``cell``'s type to ``cell``, splitting the free
        cell holding it; refused (a bug) when it is not free or over the guarantee."""
        tree = self.tree
        t = tree.ctype[cell]
        top = self.free_ancestor(cell)
        if top < 0 or self.unbound(owner, t) <= 0:
            raise EngineInvariantError(
                f"cell {tree.describe(cell)} cannot be bound to {owner}: "
                f"{'not free' if top < 0 else 'over its guarantee'}"
            )
        self.free[tree.ctype[top]].discard(top)
        node = cell
        while node != top:
            parent = tree.parent[node]
            for sibling in tree.children[parent]:
                if sibling != node:
                    self.state[sibling] = FREE
                    self.free[tree.ctype[sibling]].add(sibling)
            self.state[parent] = SPLIT
            self.region[parent] = False
            node = parent
        self.state[cell] = BOUND
        self.region[self._subtree(cell)] = False
        self.bound[cell] = owner
        self.bound_by[owner].add(cell)
        self.held[owner][t] = self.held[owner].get(t, 0) + 1
        self.gpu_owner[tree.flat(cell)] = self.owners.index(owner)

    def release(self, cell: int) -> None:
        """Untie a bound cell; buddies that are all free merge into their parent."""
        tree = self.tree
        owner = self.bound.pop(cell)
        self.bound_by[owner].discard(cell)
        t = tree.ctype[cell]
        self.held[owner][t] -= 1
        self.gpu_owner[tree.flat(cell)] = -1
        self.state[cell] = FREE
        self.free[t].add(cell)
        self.region[self._subtree(cell)] = True
        node = cell
        while tree.parent[node] >= 0:
            parent = tree.parent[node]
            siblings = tree.children[parent]
            if any(self.state[s] != FREE for s in siblings):
                break
            for sibling in siblings:
                self.free[tree.ctype[sibling]].discard(sibling)
                self.state[sibling] = INSIDE
            self.state[parent] = FREE
            self.free[tree.ctype[parent]].add(parent)
            self.region[parent] = True
            node = parent

    def _subtree(self, cell: int) -> list[int]:
        found, frontier = [cell], [cell]
        while frontier:
            frontier = [kid for c in frontier for kid in self.tree.children[c]]
            found.extend(frontier)
        return found


def _cheapest(cells: set[int] | list[int], cost: Cost) -> int | None:
    """The cell of least finite cost, ties on the lower id; None when none is finite."""
    if not cells:
        return None
    ids = np.fromiter(cells, dtype=np.intp, count=len(cells))
    costs = cost(ids)
    order = np.lexsort((ids, costs))
    best = order[0]
    return int(ids[best]) if np.isfinite(costs[best]) else None
