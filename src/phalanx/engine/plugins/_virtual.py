"""The hived plugin's session state: virtual clusters, the cells bound to them, their tasks.

Bindings are not stored between cycles: each session rebuilds them from where the
virtual clusters' tasks run, oldest job first. A running task of a virtual cluster
is *guaranteed* when its GPUs lie in one cell of a type the cluster is guaranteed,
and that cell is bound to it or can be bound (free, within the guarantee, and leaving
every other guarantee bindable); its GPUs are then *claimed*. Every other task is
*opportunistic*: reclaim and preempt may evict it for guaranteed work.

Guarantees: claims never overlap and lie in cells bound to their owner; a cell stays
bound exactly while a claim lies in it; ``claim``/``unclaim`` undo each other exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import WHOLE
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins._buddy import CellAllocator
from phalanx.engine.plugins._celltree import CellTree
from phalanx.engine.snapshot import EVICTABLE, ON_NODE, JobInfo, TaskInfo, TaskStatus

#: Cost of one GPU that must be evicted, against at most 1 for packing.
EVICTION_COST = 10.0


@dataclass(frozen=True, slots=True)
class Spot:
    """Where one task's GPUs go: sub-cell ``cell`` on ``node``, inside ``vc_cell`` (a cell
    its virtual cluster holds, or binds when the task is placed); ``evictions``: GPUs
    there that others hold and must give up first."""

    cell: int
    vc_cell: int
    node: int
    gpus: tuple[int, ...]
    evictions: int


@dataclass(frozen=True, slots=True)
class Claim:
    """A guaranteed task's hold: its virtual cluster, the bound cell, the claimed GPUs."""

    owner: str
    vc_cell: int
    flat: NDArray[np.intp]


def whole_gpus(task: TaskInfo) -> int:
    """Whole GPUs a task takes (0 for none, or a share of one)."""
    demand = task.role.cards
    return 0 if demand is None or demand.shared else demand.whole


class VirtualClusters:
    """Bindings, claims and plans of one session."""

    def __init__(self, session: Session, tree: CellTree, guarantees: dict[str, dict[int, int]]):
        self.session = session
        self.snapshot = session.snapshot
        self.tree = tree
        self.alloc = CellAllocator(tree, guarantees)
        size = len(self.snapshot.nodes) * max(tree.width, 1)
        #: owner (index into ``alloc.owners``) of the guaranteed task on each flat GPU, -1: none
        self.claimed: NDArray[np.intp] = np.full(size, -1, dtype=np.intp)
        self.claims: dict[int, Claim] = {}
        self.inside: dict[int, int] = {}
        self.stash: dict[int, Claim] = {}  # claims of evicted tasks, for an undone eviction
        self._rebuild()

    # -- claims -------------------------------------------------------------------------

    def _rebuild(self) -> None:
        jobs = sorted(
            (j for j in self.snapshot.jobs.values() if j.queue.name in self.alloc.guarantee),
            key=lambda j: (j.creation_time, j.name),
        )
        for job in jobs:
            for task in job.tasks:
                if task.status in (TaskStatus.BOUND, TaskStatus.RUNNING) and task.gpus:
                    spot = self.existing(job.queue.name, task)
                    if spot is not None:
                        self.claim(task, spot, job.queue.name)

    def flat(self, node: int, gpus: tuple[int, ...]) -> NDArray[np.intp]:
        """Flat indexes of ``gpus`` of ``node``."""
        return node * self.tree.width + np.array(gpus, dtype=np.intp)

    def types_for(self, owner: str, count: int) -> list[int]:
        """The owner's guaranteed types whose cells hold ``count`` GPUs, smallest first."""
        types = self.tree.types
        found = [t for t in self.alloc.guarantee[owner] if types[t].size >= count]
        return sorted(found, key=lambda t: (types[t].size, t))

    def existing(self, owner: str, task: TaskInfo) -> Spot | None:
        """The owner's cell holding the task's GPUs, bound to it or bindable now; or None."""
        tree, alloc = self.tree, self.alloc
        if task.node < 0 or not task.gpus or whole_gpus(task) != len(task.gpus):
            return None
        leaves = tree.leaf[task.node, list(task.gpus)]
        if (leaves < 0).any():
            return None
        for t in self.types_for(owner, len(task.gpus)):
            cell = tree.ancestor(int(leaves[0]), t)
            if cell < 0 or any(tree.ancestor(int(leaf), t) != cell for leaf in leaves):
                continue
            mine = alloc.bound.get(cell) == owner
            if mine or (
                alloc.unbound(owner, t) > 0
                and alloc.free_ancestor(cell) >= 0
                and alloc.feasible_after(cell)
            ):
                return Spot(int(leaves[0]), cell, task.node, task.gpus, 0)
        return None

    def claim(self, task: TaskInfo, spot: Spot, owner: str) -> None:
        """Hold the spot's GPUs for ``task``, binding its cell to ``owner`` if not yet bound."""
        if self.alloc.bound.get(spot.vc_cell) != owner:
            self.alloc.bind(spot.vc_cell, owner)
        flat = self.flat(spot.node, spot.gpus)
        self.claimed[flat] = self.alloc.owners.index(owner)
        self.inside[spot.vc_cell] = self.inside.get(spot.vc_cell, 0) + 1
        self.claims[id(task)] = Claim(owner, spot.vc_cell, flat)

    def unclaim(self, task: TaskInfo) -> Claim | None:
        """Give up the task's claim (None: it had none); its cell is released when empty."""
        claim = self.claims.pop(id(task), None)
        if claim is None:
            return None
        self.claimed[claim.flat] = -1
        self.inside[claim.vc_cell] -= 1
        if not self.inside[claim.vc_cell]:
            del self.inside[claim.vc_cell]
            self.alloc.release(claim.vc_cell)
        return claim

    def restore(self, task: TaskInfo, claim: Claim) -> None:
        """Put back a claim given up by ``unclaim`` (the undo of an eviction)."""
        if self.alloc.bound.get(claim.vc_cell) != claim.owner:
            self.alloc.bind(claim.vc_cell, claim.owner)
        self.claimed[claim.flat] = self.alloc.owners.index(claim.owner)
        self.inside[claim.vc_cell] = self.inside.get(claim.vc_cell, 0) + 1
        self.claims[id(task)] = claim

    # -- GPU state ----------------------------------------------------------------------

    def free_now(self) -> NDArray[np.bool_]:
        """Flat: GPUs nobody holds or is promised."""
        cards = self.snapshot.cards
        idle = (cards.milli_free == WHOLE) & (cards.memory_free == cards.memory_capacity)
        result: NDArray[np.bool_] = idle.ravel() & (self.claimed < 0)
        return result

    def evictable(self, preemptor: TaskInfo) -> NDArray[np.bool_]:
        """Flat: GPUs free once what is releasing is gone or what the preemptor may evict
        is evicted (opportunistic work, or lower-priority work of its own cluster)."""
        cards = self.snapshot.cards
        later = (cards.milli_free + cards.milli_releasing).ravel() >= WHOLE
        found = later & (self.claimed < 0)
        owner = preemptor.job.queue.name
        width = self.tree.width
        for job in self.snapshot.jobs.values():
            if job is preemptor.job or not job.spec.preemptible:
                continue
            same = job.queue is preemptor.job.queue
            if not same and not job.queue.spec.reclaimable:
                continue
            for task in job.tasks:
                if task.status not in EVICTABLE or not task.gpus:
                    continue
                claim = self.claims.get(id(task))
                if claim is None or (
                    claim.owner == owner and job.priority < preemptor.job.priority
                ):
                    found[task.node * width + np.array(task.gpus)] = True
        return found

    def holders(self, flat: NDArray[np.intp]) -> list[TaskInfo]:
        """Tasks on a node holding any of the flat GPUs, by name."""
        width = self.tree.width
        wanted = set(flat.tolist())
        nodes = {f // width for f in wanted}
        found = [
            task
            for job in self.snapshot.jobs.values()
            for task in job.tasks
            if task.status in ON_NODE
            and task.node in nodes
            and any(task.node * width + g in wanted for g in task.gpus)
        ]
        return sorted(found, key=lambda t: t.name)

    # -- plans --------------------------------------------------------------------------

    def plan(
        self, task: TaskInfo, usable: NDArray[np.bool_], nodes: NDArray[np.bool_]
    ) -> Spot | None:
        """Where a guaranteed ``task`` goes inside its virtual cluster's cells: a sub-cell of
        the smallest level that holds it, whose GPUs are all ``usable`` (flat), on one of
        ``nodes``. The cheapest wins: fewest GPUs to evict, then packed (the sub-cell whose
        parent is fullest); a cell already bound before a new one, which is chosen by the
        buddy rule. None when nothing fits."""
        owner = task.job.queue.name
        count = whole_gpus(task)
        types = self.types_for(owner, count)
        memo: dict[int, NDArray[np.float64]] = {}
        best: tuple[float, int, int, int] | None = None  # cost, new binding, sub-cell, vc cell
        for vc_cell in sorted(c for c, o in self.alloc.bound.items() if o == owner):
            if self.tree.ctype[vc_cell] in types:
                best = _better(best, self._inside(vc_cell, count, usable, nodes, memo, 0))
        if best is None or best[0] >= EVICTION_COST:
            for t in types:
                level = self._level(t, count)
                below = self._subtree_costs(level, usable, nodes, memo)
                cell = self.alloc.choose(owner, t, _lookup(below))
                if cell is not None:
                    best = _better(best, self._inside(cell, count, usable, nodes, memo, 1))
                    break
        if best is None:
            return None
        cost, _, sub, vc_cell = best
        node = self.tree.node[sub]
        return Spot(sub, vc_cell, node, self.tree.gpus[sub], int(cost // EVICTION_COST))

    def _level(self, t: int, count: int) -> int:
        """The smallest type of ``t``'s chain (at or below ``t``) whose cells hold ``count``."""
        types = self.tree.types
        level = t
        while types[level].child >= 0 and types[types[level].child].size >= count:
            level = types[level].child
        return level

    def _subtree_costs(
        self,
        level: int,
        usable: NDArray[np.bool_],
        nodes: NDArray[np.bool_],
        memo: dict[int, NDArray[np.float64]],
    ) -> NDArray[np.float64]:
        """Per cell (inf outside ``level``'s chain): the cost of its cheapest sub-cell of type
        ``level``. A sub-cell costs ``EVICTION_COST`` per GPU not free now, plus the free
        share of its parent; it is inf when a GPU is not ``usable`` or its node not in ``nodes``."""
        if level in memo:
            return memo[level]
        tree = self.tree
        members = tree.members(level)
        cells = tree.of_type[level]
        free = self.free_now()
        cost = np.where(free[members], 0.0, EVICTION_COST).sum(axis=1)
        on = tree.nodes[cells]
        ok = usable[members].all(axis=1) & (on >= 0) & nodes[np.maximum(on, 0)]
        parent_type = tree.parent_type[level]
        if parent_type >= 0:
            siblings = tree.members(parent_type)[tree.row[tree.parents[cells]]]
            cost += free[siblings].mean(axis=1)
        best = np.full(tree.count, np.inf)
        best[cells] = np.where(ok, cost, np.inf)
        t = parent_type
        below = cells
        while t >= 0:
            up = tree.parents[below]
            has = up >= 0  # cells of one type may sit under a parent or be tops
            np.minimum.at(best, up[has], best[below[has]])
            below, t = tree.of_type[t], tree.parent_type[t]
        memo[level] = best
        return best

    def _inside(
        self,
        vc_cell: int,
        count: int,
        usable: NDArray[np.bool_],
        nodes: NDArray[np.bool_],
        memo: dict[int, NDArray[np.float64]],
        new: int,
    ) -> tuple[float, int, int, int] | None:
        """(cost, ``new``, sub-cell, vc_cell) of the cheapest sub-cell of ``vc_cell``."""
        level = self._level(self.tree.ctype[vc_cell], count)
        cost = self._subtree_costs(level, usable, nodes, memo)
        subs = self.tree.descendants(vc_cell, level)
        values = cost[np.array(subs, dtype=np.intp)]
        k = int(np.argmin(values))
        return None if not np.isfinite(values[k]) else (float(values[k]), new, subs[k], vc_cell)

    def describe_busy(self, job: JobInfo, count: int) -> str:
        """What fills the virtual cluster's cells, for a reason."""
        owner = job.queue.name
        tree, alloc = self.tree, self.alloc
        parts = []
        for vc_cell in sorted(c for c, o in alloc.bound.items() if o == owner)[:4]:
            others = sorted({t.job.queue.name for t in self.holders(tree.flat(vc_cell))} - {owner})
            held = f"work of queue {', '.join(others)}" if others else "its own jobs"
            parts.append(f"{tree.describe(vc_cell)} holds {held}")
        unbound = sum(alloc.unbound(owner, t) for t in self.types_for(owner, count))
        if unbound:
            parts.append(f"{unbound} not bound yet (no free cell can take it now)")
        return "; ".join(parts)


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
