"""Where opportunistic GPU work goes so that guaranteed cells stay whole (the hived plugin's).

The *pool* is every cell that is idle (no GPU held or promised) and unbound: what
virtual clusters can still bind without evicting anyone. Taking a cell of type L out
of a maximal pool cell of type H breaks H into its other children, down to L. The
break is *safe* when the pool can then still hold every unbound guarantee.

A sub-cell of the smallest level that holds an opportunistic task is ranked: safe
and unbound first, then inside a cell some virtual cluster holds (its idle GPUs are
lent until it needs them), then unsafe; within a rank, a sub-cell already in use
(the fullest that fits) before an idle one, and among idle ones the one breaking the
smallest pool cell (buddy packing); then the lower id (name order).

Guarantees: every query is vectorised over cells of one type at a time, and reads
the session state without changing it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import CardDemand
from phalanx.engine.plugins.hived.virtual import VirtualClusters

#: Rank weights: the category (safe, lent, unsafe) decides before the packing depth.
_CATEGORY = 100.0


class Pool:
    """The idle unbound cells when it was made, and which breaks of them are safe."""

    def __init__(self, vcs: VirtualClusters) -> None:
        self.vcs = vcs
        tree = vcs.tree
        free = vcs.free_now()
        idle = np.zeros(tree.count, dtype=np.bool_)
        for t, cells in enumerate(tree.of_type):
            if len(cells):
                idle[cells] = free[tree.members(t)].all(axis=1)
        self.open: NDArray[np.bool_] = idle & vcs.alloc.region
        parents = tree.parents
        has = parents >= 0
        above = np.zeros(tree.count, dtype=np.bool_)
        above[has] = self.open[parents[has]]
        maximal = self.open & ~above
        self.avail = np.bincount(tree.kind[maximal], minlength=len(tree.types)).tolist()
        self.demand = vcs.alloc.demand()
        self._safe: dict[tuple[int, int], bool] = {}

    def safe(self, level: int, top: int) -> bool:
        """Whether taking a ``level`` cell out of a maximal pool cell of type ``top`` keeps
        every unbound guarantee bindable from the pool."""
        key = (level, top)
        if key not in self._safe:
            tree = self.vcs.tree
            counts = list(self.avail)
            counts[top] -= 1
            t = level
            while t != top:
                parent = tree.parent_type[t]
                counts[t] += tree.types[parent].children - 1
                t = parent
            self._safe[key] = self.vcs.alloc.feasible(counts, self.demand)
        return self._safe[key]

    def ranks(
        self, cells: NDArray[np.intp], usable: NDArray[np.bool_], count: int
    ) -> NDArray[np.float64]:
        """Rank of each of ``cells`` (all of one type) for ``count`` GPUs of opportunistic
        work (lower is better); inf where fewer than ``count`` GPUs are ``usable`` (flat),
        free and not promised. A cell in use already breaks no pool cell of its level (the
        fullest first); an idle one breaks its pool cell (the smallest first)."""
        vcs = self.vcs
        tree = vcs.tree
        level = tree.ctype[int(cells[0])]
        members = tree.members(level)[tree.row[cells]]
        free = (usable & vcs.free_now())[members].sum(axis=1)
        lent = (vcs.alloc.gpu_owner[members] >= 0).any(axis=1)
        top = cells.copy()
        alive = self.open[cells]
        depth = alive.astype(np.float64)
        for _ in range(len(tree.types)):
            up = tree.parents[top]
            step = alive & (up >= 0)
            step[step] = self.open[up[step]]
            if not step.any():
                break
            top = np.where(step, up, top)
            depth += step
            alive = step
        kinds, where = np.unique(tree.kind[top], return_inverse=True)
        safe = np.array([self.safe(level, int(k)) for k in kinds], dtype=np.bool_)[where.ravel()]
        safe |= ~self.open[cells]
        category = np.where(lent, 1.0, np.where(safe, 0.0, 2.0))
        fit = (free - count) / (2 * members.shape[1])
        return np.where(free >= count, category * _CATEGORY + depth + fit, np.inf)

    def level_for(self, node_type: int, count: int) -> int:
        """The smallest type at or below ``node_type`` whose cells hold ``count`` GPUs, or -1."""
        types = self.vcs.tree.types
        if types[node_type].size < count:
            return -1
        t = node_type
        while types[t].child >= 0 and types[types[t].child].size >= count:
            t = types[t].child
        return t

    def choose(self, node: int, demand: CardDemand) -> tuple[int, ...] | None:
        """The GPUs of the best-ranked sub-cell of ``node`` for a task of ``demand``."""
        tree = self.vcs.tree
        if tree.node_cell[node] < 0:
            return None
        level = self.level_for(tree.ctype[int(tree.node_cell[node])], demand.whole)
        if level < 0:
            return None
        cells = np.array(tree.descendants(int(tree.node_cell[node]), level), dtype=np.intp)
        usable = np.zeros(len(self.vcs.claimed), dtype=np.bool_)
        width = tree.width
        cards = self.vcs.snapshot.cards
        usable[node * width : (node + 1) * width] = cards.usable(demand, slice(node, node + 1))[0]
        ranks = self.ranks(cells, usable, demand.whole)
        k = int(np.argmin(ranks))
        if not np.isfinite(ranks[k]):
            return None
        cell = int(cells[k])
        free = usable & self.vcs.free_now()
        return tuple(g for g, f in zip(tree.gpus[cell], tree.flat(cell), strict=True) if free[f])[
            : demand.whole
        ]

    def masks(self, demand: CardDemand) -> tuple[NDArray[np.bool_], ...]:
        """Node masks to try, best first: nodes whose best sub-cell ranks best (and nodes
        without cells), then nodes with a safe sub-cell, then every node."""
        vcs = self.vcs
        tree = vcs.tree
        n = len(vcs.snapshot.nodes)
        best = np.full(n, np.inf)
        best[tree.node_cell < 0] = 0.0
        usable = vcs.snapshot.cards.usable(demand, slice(None)).ravel()
        node_types = np.unique(tree.kind[tree.node_cell[tree.node_cell >= 0]])
        for node_type in node_types.tolist():
            level = self.level_for(node_type, demand.whole)
            if level < 0:
                continue
            cells = tree.of_type[level]
            nodes = tree.nodes[cells]
            keep = tree.kind[tree.node_cell[nodes]] == node_type
            if keep.any():
                np.minimum.at(best, nodes[keep], self.ranks(cells[keep], usable, demand.whole))
        everything = np.ones(n, dtype=np.bool_)
        finite = best[np.isfinite(best)]
        if not finite.size:
            return (everything,)
        found = [best <= finite.min(), best < _CATEGORY, everything]
        unique: list[NDArray[np.bool_]] = []
        for mask in found:
            if mask.any() and not any(np.array_equal(mask, m) for m in unique):
                unique.append(mask)
        return tuple(unique)
