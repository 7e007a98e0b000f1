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
#: Cost of binding a cell that cannot hold the rest of the gang (the gang would spread).
SPREAD_COST = 5.0


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
        #: bumped whenever a task moves (the plugin's on_allocate / on_deallocate)
        self.version = 0
        self._free: tuple[int, NDArray[np.bool_]] | None = None
        self._evictable: dict[tuple[str, int, str], tuple[int, NDArray[np.bool_]]] = {}
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
        """Flat: GPUs nobody holds or is promised (read-only)."""
        if self._free is None or self._free[0] != self.version:
            cards = self.snapshot.cards
            idle = (cards.milli_free == WHOLE) & (cards.memory_free == cards.memory_capacity)
            found: NDArray[np.bool_] = idle.ravel() & (self.claimed < 0)
            found.flags.writeable = False
            self._free = (self.version, found)
        return self._free[1]

    def evictable(self, preemptor: TaskInfo) -> NDArray[np.bool_]:
        """Flat: GPUs free once what is releasing is gone or what the preemptor may evict
        is evicted (opportunistic work, or lower-priority work of its own cluster);
        read-only."""
        job = preemptor.job
        key = (job.queue.name, job.priority, job.name)
        known = self._evictable.get(key)
        if known is None or known[0] != self.version:
            found = self._evictable_now(preemptor)
            found.flags.writeable = False
            known = self._evictable[key] = (self.version, found)
        return known[1]

    def _evictable_now(self, preemptor: TaskInfo) -> NDArray[np.bool_]:
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
        """Where a guaranteed ``task`` of k GPUs goes inside its virtual cluster's cells: k
        ``usable`` (flat) GPUs of one sub-cell of the smallest level holding k, on one of
        ``nodes``. The cheapest wins: fewest GPUs to evict, then packed (the fullest
        sub-cell that fits, in the fullest parent); a cell already bound before a new one,
        which is chosen by the buddy rule. None when nothing fits."""
        owner = task.job.queue.name
        count = whole_gpus(task)
        types = self.types_for(owner, count)
        wanted = sum(1 for t in task.job.tasks if t.status is TaskStatus.PENDING)
        costs = _Costs(self, count, usable, nodes, wanted)
        best: tuple[float, int, int, int] | None = None  # cost, new binding, sub-cell, vc cell
        for vc_cell in sorted(c for c, o in self.alloc.bound.items() if o == owner):
            if self.tree.ctype[vc_cell] in types:
                best = _better(best, costs.inside(vc_cell, 0))
        if best is None or best[0] >= EVICTION_COST:
            for t in types:
                cell = self.alloc.choose(owner, t, _lookup(costs.binding(self.level(t, count), t)))
                if cell is not None:
                    best = _better(best, costs.inside(cell, 1))
                    break
        if best is None:
            return None
        cost, _, sub, vc_cell = best
        gpus = costs.pick(sub)
        return Spot(sub, vc_cell, self.tree.node[sub], gpus, int(cost // EVICTION_COST))

    def level(self, t: int, count: int) -> int:
        """The smallest type of ``t``'s chain (at or below ``t``) whose cells hold ``count``."""
        types = self.tree.types
        level = t
        while types[level].child >= 0 and types[types[level].child].size >= count:
            level = types[level].child
        return level

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
        below, t = cells, parent_type
        while t >= 0:
            up = tree.parents[below]
            has = up >= 0  # cells of one type may sit under a parent or be tops
            np.minimum.at(best, up[has], best[below[has]])
            np.add.at(room, up[has], room[below[has]])
            below, t = tree.of_type[t], tree.parent_type[t]
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
