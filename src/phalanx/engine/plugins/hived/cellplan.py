"""Where a guaranteed task goes inside its virtual cluster's cells (the hived plugin's).

Costs are vectorised over every cell of one level at a time and reduced up the chain
(``reduceat`` per level), so a plan never loops over nodes in Python.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.plugins.hived.virtual import Spot, VirtualClusters, whole_gpus
from phalanx.engine.snapshot import TaskInfo, TaskStatus

#: Cost of one GPU that must be evicted, against at most 1 for packing.
EVICTION_COST = 10.0
#: Cost of binding a cell that cannot hold the rest of the gang (the gang would spread).
SPREAD_COST = 5.0


def plan(
    vcs: VirtualClusters, task: TaskInfo, usable: NDArray[np.bool_], nodes: NDArray[np.bool_]
) -> Spot | None:
    """Where a guaranteed ``task`` of k GPUs goes inside its virtual cluster's cells: k
    ``usable`` (flat) GPUs of one sub-cell of the smallest level holding k, on one of
    ``nodes``. The cheapest wins: fewest GPUs to evict, then packed (the fullest
    sub-cell that fits, in the fullest parent); a cell already bound before a new one,
    which is chosen by the buddy rule. None when nothing fits."""
    owner = task.job.queue.name
    count = whole_gpus(task)
    types = vcs.types_for(owner, count)
    wanted = sum(1 for t in task.job.tasks if t.status is TaskStatus.PENDING)
    costs = _Costs(vcs, count, usable, nodes, wanted)
    best: tuple[float, int, int, int] | None = None  # cost, new binding, sub-cell, vc cell
    mine = vcs.alloc.bound_by[owner]
    held = np.fromiter(sorted(mine), dtype=np.intp, count=len(mine))
    for t in types:
        cells = held[vcs.tree.kind[held] == t]
        if cells.size:
            values = costs.below(vcs.level(t, count))[cells]
            k = int(np.lexsort((cells, values))[0])
            if np.isfinite(values[k]):
                best = _better(best, costs.inside(int(cells[k]), 0))
    if best is None or best[0] >= EVICTION_COST:
        for t in types:
            cell = vcs.alloc.choose(owner, t, _lookup(costs.binding(vcs.level(t, count), t)))
            if cell is not None:
                best = _better(best, costs.inside(cell, 1))
                break
    if best is None:
        return None
    cost, _, sub, vc_cell = best
    gpus = costs.pick(sub)
    return Spot(sub, vc_cell, vcs.tree.node[sub], gpus, int(cost // EVICTION_COST))


def _better(
    best: tuple[float, int, int, int] | None, found: tuple[float, int, int, int] | None
) -> tuple[float, int, int, int] | None:
    if found is None:
        return best
    return found if best is None or found < best else best


def _lookup(table: NDArray[np.float64]) -> Callable[[NDArray[np.intp]], NDArray[np.float64]]:
    def cost(cells: NDArray[np.intp]) -> NDArray[np.float64]:
        found: NDArray[np.float64] = table[cells]
        return found

    return cost


class _Costs:
    """Costs of sub-cells for one plan of ``count`` GPUs (memoised per level)."""

    def __init__(
        self,
        vcs: VirtualClusters,
        count: int,
        usable: NDArray[np.bool_],
        nodes: NDArray[np.bool_],
        wanted: int,
    ) -> None:
        self.vcs = vcs
        self.tree = vcs.tree
        self.count = count
        self.usable = usable
        self.nodes = nodes
        self.wanted = wanted  # tasks of the gang still to place, this one included
        self.free = vcs.free_now() & usable
        self.memo: dict[int, NDArray[np.float64]] = {}
        self.room: dict[int, NDArray[np.float64]] = {}  # per cell: tasks its sub-cells hold

    def binding(self, level: int, t: int) -> NDArray[np.float64]:
        """``below(level)``, plus ``SPREAD_COST`` for cells of type ``t`` that cannot hold
        as much of the gang as a cell of the type could: the gang stays in one cell."""
        best = self.below(level)
        whole = min(self.wanted, self.tree.types[t].size // self.count)
        return best + np.where(self.room[level] >= whole, 0.0, SPREAD_COST)

    def below(self, level: int) -> NDArray[np.float64]:
        """Per cell (inf outside ``level``'s chain): the cost of its cheapest sub-cell of type
        ``level``: ``EVICTION_COST`` per GPU to evict, plus the share of the sub-cell left
        free and the free share of its parent (best fit); inf when fewer than ``count``
        GPUs are usable or the node is not in ``nodes``."""
        if level in self.memo:
            return self.memo[level]
        tree, count = self.tree, self.count
        members = tree.members(level)
        cells = tree.of_type[level]
        free = self.free[members].sum(axis=1)
        on = tree.nodes[cells]
        ok = (self.usable[members].sum(axis=1) >= count) & (on >= 0)
        ok &= self.nodes[np.maximum(on, 0)]
        cost = np.maximum(count - free, 0) * EVICTION_COST
        cost += np.maximum(free - count, 0) / (2 * members.shape[1])
        parent_type = tree.parent_type[level]
        if parent_type >= 0:
            up = tree.parents[cells]
            has = up >= 0
            siblings = tree.members(parent_type)[tree.row[np.maximum(up, 0)]]
            cost += np.where(has, self.free[siblings].mean(axis=1), 0.0) / 2
        best = np.full(tree.count, np.inf)
        best[cells] = np.where(ok, cost, np.inf)
        room = np.zeros(tree.count)
        room[cells] = np.where(ok, self.usable[members].sum(axis=1) // count, 0)
        child = level
        while tree.parent_type[child] >= 0:  # up the chain, one reduction per level
            grouped, starts, parents = tree.groups(child)
            if len(grouped):
                best[parents] = np.minimum.reduceat(best[grouped], starts)
                room[parents] = np.add.reduceat(room[grouped], starts)
            child = tree.parent_type[child]
        self.memo[level] = best
        self.room[level] = room
        return best

    def inside(self, vc_cell: int, new: int) -> tuple[float, int, int, int] | None:
        """(cost, ``new``, sub-cell, vc_cell) of the cheapest sub-cell of ``vc_cell``."""
        level = self.vcs.level(self.tree.ctype[vc_cell], self.count)
        subs = self.tree.descendants(vc_cell, level)
        values = self.below(level)[np.array(subs, dtype=np.intp)]
        k = int(np.argmin(values))
        return None if not np.isfinite(values[k]) else (float(values[k]), new, subs[k], vc_cell)

    def pick(self, sub: int) -> tuple[int, ...]:
        """``count`` GPUs of ``sub``: free ones first, then those to evict, by index."""
        tree = self.tree
        flat = tree.flat(sub)
        order = sorted(range(len(flat)), key=lambda i: (not self.free[flat[i]], i))
        chosen = [i for i in order if self.usable[flat[i]]][: self.count]
        return tuple(sorted(tree.gpus[sub][i] for i in chosen))
