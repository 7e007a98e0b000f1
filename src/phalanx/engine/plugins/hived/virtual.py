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

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import WHOLE
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.hived.buddy import CellAllocator
from phalanx.engine.plugins.hived.celltree import CellTree
from phalanx.engine.snapshot import EVICTABLE, ON_NODE, JobInfo, TaskInfo, TaskStatus


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
    """A guaranteed task's hold: its virtual cluster, the bound cell, the claimed GPUs, and
    its job's priority (higher-priority work of the cluster may take them)."""

    owner: str
    vc_cell: int
    flat: NDArray[np.intp]
    priority: int


def whole_gpus(task: TaskInfo) -> int:
    """Whole GPUs a task takes (0 for none, or a share of one)."""
    demand = task.role.cards
    return 0 if demand is None or demand.shared else demand.whole


class VirtualClusters:
    """Bindings and claims of one session, and the GPU state plans read."""

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
        self._holders: _Holders | None = None
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
        self.claims[id(task)] = Claim(owner, spot.vc_cell, flat, task.job.priority)

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
        """Flat: GPUs nobody holds or is promised, never a cordoned one (read-only)."""
        if self._free is None or self._free[0] != self.version:
            cards = self.snapshot.cards
            idle = (cards.milli_free == WHOLE) & (cards.memory_free == cards.memory_capacity)
            if cards.any_cordoned:  # a cordoned card is never free for new work
                idle &= cards.offered
            found: NDArray[np.bool_] = idle.ravel() & (self.claimed < 0)
            found.flags.writeable = False
            self._free = (self.version, found)
        return self._free[1]

    def evictable(self, preemptor: TaskInfo) -> NDArray[np.bool_]:
        """Flat: GPUs free once what is releasing is gone or what the preemptor may evict
        is evicted (opportunistic work, or lower-priority work of its own cluster),
        never a cordoned one; read-only."""
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
        if self._holders is None:
            self._holders = _Holders(self)
        found[self._holders.evictable(preemptor, self)] = True
        if cards.any_cordoned:  # evicting a cordoned card's holder frees nothing for work
            found &= cards.offered.ravel()
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

    def level(self, t: int, count: int) -> int:
        """The smallest type of ``t``'s chain (at or below ``t``) whose cells hold ``count``."""
        types = self.tree.types
        level = t
        while types[level].child >= 0 and types[types[level].child].size >= count:
            level = types[level].child
        return level

    def describe_busy(self, job: JobInfo, count: int) -> str:
        """What fills the virtual cluster's cells, for a reason: its bound cells and who
        holds them, and how many are not bound yet."""
        owner = job.queue.name
        tree, alloc = self.tree, self.alloc
        parts = []
        bound = sorted(alloc.bound_by[owner])
        for vc_cell in bound[:3]:
            queues = {t.job.queue.name for t in self.holders(tree.flat(vc_cell))}
            others = sorted(queues - {owner})
            held = f"work of queue {', '.join(others)}" if others else "its own jobs"
            if others and owner in queues:
                held = f"its own jobs and {held}"
            parts.append(f"{tree.describe(vc_cell)} holds {held}")
        if len(bound) > 3:
            parts.append(f"{len(bound) - 3} more bound")
        unbound = sum(alloc.unbound(owner, t) for t in self.types_for(owner, count))
        if unbound:
            parts.append(f"{unbound} not bound yet (every cell it may bind holds other work)")
        return ", ".join(parts)


class _Holders:
    """Every task that may be evicted in this session (bound or running, holding GPUs when
    first asked) with its GPUs, as arrays. Sessions only evict such tasks (or undo that)."""

    def __init__(self, vcs: VirtualClusters) -> None:
        width = vcs.tree.width
        tasks = [
            t
            for job in vcs.snapshot.jobs.values()
            for t in job.tasks
            if t.status in EVICTABLE and t.gpus
        ]
        queues = {name: i for i, name in enumerate(sorted({t.job.queue.name for t in tasks}))}
        self.queues = queues
        self.queue = np.array([queues[t.job.queue.name] for t in tasks], dtype=np.intp)
        self.priority = np.array([t.job.priority for t in tasks], dtype=np.int64)
        self.job = np.array([id(t.job) for t in tasks], dtype=np.int64)
        self.preemptible = np.array([t.job.spec.preemptible for t in tasks], dtype=np.bool_)
        self.reclaimable = np.array([t.job.queue.spec.reclaimable for t in tasks], dtype=np.bool_)
        self.flat = np.array([t.node * width + g for t in tasks for g in t.gpus], dtype=np.intp)
        self.task = np.array([i for i, t in enumerate(tasks) for _ in t.gpus], dtype=np.intp)

    def evictable(self, preemptor: TaskInfo, vcs: VirtualClusters) -> NDArray[np.intp]:
        """Flat GPUs held by work ``preemptor`` may evict: others' opportunistic work
        (preemptible, in a reclaimable queue or its own), or lower-priority guaranteed
        work of its own virtual cluster."""
        job = preemptor.job
        same = self.queue == self.queues.get(job.queue.name, -1)
        ok = self.preemptible & (self.reclaimable | same) & (self.job != id(job))
        owners = vcs.alloc.owners
        own = owners.index(job.queue.name) if job.queue.name in owners else -2
        claimed = vcs.claimed[self.flat]
        lower = self.priority[self.task] < job.priority
        per_gpu = ok[self.task] & ((claimed < 0) | ((claimed == own) & lower))
        found: NDArray[np.intp] = self.flat[per_gpu]
        return found
