"""hived: virtual clusters with topology-shaped guarantees (HiveD, OSDI'20).

Nodes carry cells (``Node.cells``: GPU, PCIe switch or NVLink island, socket, node,
and groups of nodes; see ``phalanx.domain.cells``). A queue with ``cells`` is a
virtual cluster guaranteed that many whole cells of each type: "two 8-GPU NVLink
domains" is two node cells, never 16 GPUs scattered over four nodes.

- Binding (buddy allocation): a virtual cluster's cell is tied to a physical cell of
  its type only when a task needs it, by the buddy rule (a free cell of the type, else
  a split of the smallest free higher cell; the fewest GPUs to evict, then name order);
  buddies merge back when released. A binding that would leave another cluster's
  guarantee unbindable is never made; guarantees that together exceed the cells are
  refused up front: the later queues' jobs are invalid, with a reason naming them.
- Guaranteed jobs (a cluster's job its unclaimed cells can hold): each task of k GPUs
  gets a sub-cell of the smallest level holding k (a 4-GPU task: one NVLink quad of a
  DGX-1) inside the cluster's cells, bound cells first (packed). When its cells are
  busy with others' work, the job waits with a reason, and reclaim and preempt evict
  that work from exactly the cell chosen (``evict_within`` and the victim filters).
- Opportunistic jobs (other queues' GPU jobs, and a cluster's jobs beyond its
  guarantee): placed on free GPUs, preferring cells whose use keeps every unbound
  guarantee bindable without eviction, then packed into the smallest idle cell;
  they may be evicted by guaranteed work. Guaranteed work is never a victim of other
  queues; in its own cluster, lower priority work may be preempted.

Bindings are rebuilt each cycle from where tasks run (see ``virtual``). Put hived in
a tier before other ``gpu_select`` plugins (gpu-topology ...): the first answer wins.
A cluster without queues with cells costs nothing: the plugin joins no point (but
``job_valid``, when a queue's cells are refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.confinement import Confinement, ConfinementOffer, ConfinementQuery
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.hived.buddy import CellAllocator
from phalanx.engine.plugins.hived.cellplan import plan
from phalanx.engine.plugins.hived.celltree import CellTree
from phalanx.engine.plugins.hived.opportunistic import Pool
from phalanx.engine.plugins.hived.virtual import Spot, VirtualClusters, whole_gpus
from phalanx.engine.snapshot import EPSILON, JobInfo, Snapshot, TaskInfo, TaskStatus


@dataclass(frozen=True, slots=True)
class _Open:
    """One session: why queues' cells are refused, and the cells' session (None when no
    queue has a guarantee)."""

    invalid: dict[str, str]
    cells: _Session | None

    @property
    def live(self) -> _Session:
        """The cells' session (only asked for where there is one: see ``skipped``)."""
        assert self.cells is not None
        return self.cells


class HivedPlugin(Plugin[_Open]):
    """Virtual clusters of whole cells, bound by buddy allocation."""

    name = "hived"

    def open(self, session: Session) -> _Open:
        tree = session.kept.get(CellTree, Lifetime.FIXED)
        guarantees, invalid = session.kept.get(_guarantees, Lifetime.FIXED, tree)
        if not guarantees:
            return _Open(invalid, None)
        return _Open(invalid, _Session(session, VirtualClusters(session, tree, guarantees)))

    def skipped(self, state: _Open) -> set[str]:
        """Without refused cells no ``job_valid``; without guarantees nothing else."""
        skipped = {point for point in self.provides if state.cells is None}
        return skipped - {"job_valid"} if state.invalid else skipped | {"job_valid"}

    def job_valid(self, state: _Open, job: JobInfo) -> str | None:
        return state.invalid.get(job.queue.name)

    def confinement(self, state: _Open, job: JobInfo) -> Confinement | None:
        return state.live.rule(job)

    def gpu_select(self, state: _Open, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        return state.live.select(task, node)

    def preemptable(
        self, state: _Open, preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        return state.live.victims(preemptor, candidates)

    def reclaimable(
        self, state: _Open, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        return state.live.victims(reclaimer, candidates)

    def on_allocate(self, state: _Open, task: TaskInfo) -> None:
        state.live.allocated(task)

    def on_deallocate(self, state: _Open, task: TaskInfo) -> None:
        state.live.deallocated(task)


def _guarantees(
    snapshot: Snapshot, tree: CellTree
) -> tuple[dict[str, dict[int, int]], dict[str, str]]:
    """Each leaf queue's guaranteed cells by type, and why the others' are refused: a type
    no node has, or more than the cells hold with the queues before it (by name)."""
    counts = [0] * len(tree.types)
    for top in tree.tops:
        counts[tree.ctype[top]] += 1
    empty = CellAllocator(tree, {})
    demand = [0] * len(tree.types)
    accepted: dict[str, dict[int, int]] = {}
    invalid: dict[str, str] = {}
    for queue in snapshot.leaf_queues():
        cells = queue.spec.cells
        if not cells:
            continue
        unknown = sorted(c.type for c in cells if c.type not in tree.type_index)
        if unknown:
            known = ", ".join(sorted(tree.type_index)) or "none: no node has cells"
            invalid[queue.name] = (
                f"queue {queue.name}: spec.cells names cell type {unknown[0]!r}, which no "
                f"node has; fix: use one of {known}"
            )
            continue
        wanted = {tree.type_index[c.type]: c.count for c in cells}
        trial = [d + wanted.get(t, 0) for t, d in enumerate(demand)]
        if not empty.feasible(counts, trial):
            asked = ", ".join(f"{c.count} {c.type}" for c in cells)
            before = f" besides those of {', '.join(accepted)}" if accepted else ""
            invalid[queue.name] = (
                f"queue {queue.name}: spec.cells asks for {asked}, more than the cluster's "
                f"cells hold{before}; fix: lower spec.cells counts, or add nodes"
            )
            continue
        demand = trial
        accepted[queue.name] = wanted
    return accepted, invalid


class _Session:
    """The plugin's callbacks for one session."""

    def __init__(self, session: Session, vcs: VirtualClusters) -> None:
        self.session = session
        self.vcs = vcs
        self.spots: dict[str, dict[int, Spot]] = {}  # job -> node -> where its next task goes
        self.pools: dict[str, Pool] = {}  # opportunistic job -> the pool its offer saw
        self._pool: tuple[int, Pool] | None = None
        self.guaranteed_rule = Confinement(
            key=("hived", "guaranteed"),
            offer=self.offer_guaranteed,
            group=1,
            evict_within=self.evict_within,
        )
        self.opportunistic_rule = Confinement(
            key=("hived", "opportunistic"), offer=self.offer_opportunistic
        )

    # -- which rule ---------------------------------------------------------------------

    def rule(self, job: JobInfo) -> Confinement | None:
        """Guaranteed jobs go task by task into their cells; other GPU jobs are opportunistic."""
        if not any(role.cards is not None for role in job.roles):
            return None
        return self.guaranteed_rule if self.guaranteed(job) else self.opportunistic_rule

    def guaranteed(self, job: JobInfo) -> bool:
        """Whether ``job`` runs on its virtual cluster's guarantee: whole GPUs per task that
        a guaranteed type holds, and no more in total than its cells have besides what
        its work of the same or higher priority claims."""
        vcs = self.vcs
        owner = job.queue.name
        if owner not in vcs.alloc.guarantee:
            return False
        for role in job.roles:
            demand = role.cards
            if demand is not None and (demand.shared or not vcs.types_for(owner, demand.whole)):
                return False
        types = vcs.tree.types
        total = sum(types[t].size * n for t, n in vcs.alloc.guarantee[owner].items())
        used = sum(
            len(c.flat)
            for c in vcs.claims.values()
            if c.owner == owner and c.priority >= job.priority
        )
        pending = sum(whole_gpus(t) for t in job.tasks if t.status is TaskStatus.PENDING)
        return pending <= total - used

    # -- guaranteed jobs ----------------------------------------------------------------

    def offer_guaranteed(self, query: ConfinementQuery) -> ConfinementOffer:
        (task,) = query.tasks
        n = len(query.slots)
        if not whole_gpus(task):
            return ConfinementOffer(masks=(np.ones(n, dtype=np.bool_),))
        vcs = self.vcs
        static = self.session.static_mask(task.role)[0]
        need = task.request > 0
        room = (query.free[:, need] + EPSILON >= task.request[need]).all(axis=1)
        assert task.role.cards is not None
        cards = self.session.snapshot.cards.usable(task.role.cards, slice(None)).ravel()
        spot = plan(vcs, task, vcs.free_now() & cards, static & room & (query.slots >= 1))
        if spot is not None:
            self.spots[task.job.name] = {spot.node: spot}
            return ConfinementOffer(masks=(_only(n, spot.node),))
        later = plan(vcs, task, vcs.evictable(task), static)
        return ConfinementOffer(masks=(), reason=self._busy(task, later))

    def evict_within(self, query: ConfinementQuery) -> NDArray[np.bool_] | None:
        (task,) = query.tasks
        if not whole_gpus(task):
            return None
        vcs = self.vcs
        spot = plan(vcs, task, vcs.evictable(task), self.session.static_mask(task.role)[0])
        if spot is None:
            self.spots.pop(task.job.name, None)
            return np.zeros(len(query.slots), dtype=np.bool_)
        self.spots[task.job.name] = {spot.node: spot}
        return _only(len(query.slots), spot.node)

    def _busy(self, task: TaskInfo, later: Spot | None) -> Reason:
        """Why a guaranteed task waits: what holds its cluster's cells, and the fix."""
        vcs = self.vcs
        owner = task.job.queue.name
        count = whole_gpus(task)
        types = vcs.types_for(owner, count)
        level = vcs.tree.types[vcs.level(types[0], count)]
        held = sum(vcs.alloc.guarantee[owner][t] for t in types)
        if later is not None:
            fix = (
                f"reclaim or preempt evicts the {later.evictions} GPU(s) of other work in "
                f"{vcs.tree.describe(later.cell)} (configure one of those actions if absent)"
            )
        elif any(vcs.alloc.unbound(owner, t) for t in types):
            fix = (
                "wait for that work to end, or make it evictable (preemptible jobs in "
                "reclaimable queues)"
            )
        else:
            fix = "wait for its own jobs to end, or raise spec.cells"
        return Reason(
            code=ReasonCode.CELLS_BUSY,
            message=f"queue {owner}: task {task.role.name} needs one free {level.size}-GPU "
            f"{level.name} cell; its {held} guaranteed cell(s) are busy: "
            f"{vcs.describe_busy(task.job, count)}; fix: {fix}",
            queue=owner,
            resource="gpu",
        )

    # -- opportunistic jobs -------------------------------------------------------------

    def pool(self) -> Pool:
        """The pool as it is now (rebuilt only after a task moved)."""
        if self._pool is None or self._pool[0] != self.vcs.version:
            self._pool = (self.vcs.version, Pool(self.vcs))
        return self._pool[1]

    def offer_opportunistic(self, query: ConfinementQuery) -> ConfinementOffer:
        pool = self.pools[query.job.name] = self.pool()
        demands = [r.cards for r in query.job.roles if r.cards is not None and not r.cards.shared]
        if not demands:
            return ConfinementOffer(masks=(np.ones(len(query.slots), dtype=np.bool_),))
        return ConfinementOffer(masks=pool.masks(max(demands, key=lambda d: d.whole)))

    # -- shared callbacks ---------------------------------------------------------------

    def select(self, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        """The spot's GPUs for a guaranteed task; the best-ranked sub-cell otherwise."""
        demand = task.role.cards
        if demand is None or demand.shared:
            return None
        spot = self.spots.get(task.job.name, {}).get(node)
        if spot is not None:
            return spot.gpus
        pool = self.pools.get(task.job.name)
        return (pool if pool is not None else self.pool()).choose(node, demand)

    def victims(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Never others' guaranteed work. For a guaranteed preemptor with a spot: on the
        spot's node, what holds the spot's GPUs (or no GPU); elsewhere, only the gang
        members of those, which go with them."""
        claims = self.vcs.claims
        owner, priority = preemptor.job.queue.name, preemptor.job.priority
        allowed = [
            task
            for task in candidates
            if (claim := claims.get(id(task))) is None
            or (claim.owner == owner and task.job.priority < priority)
        ]
        spots = self.spots.get(preemptor.job.name)
        if not spots:
            return allowed
        ((node, spot),) = spots.items()
        wanted = set(spot.gpus)
        here = {id(t) for t in allowed if t.node == node and (not t.gpus or wanted & set(t.gpus))}
        jobs = {id(t.job) for t in allowed if id(t) in here}
        return [t for t in allowed if id(t) in here or (t.node != node and id(t.job) in jobs)]

    def allocated(self, task: TaskInfo) -> None:
        vcs = self.vcs
        vcs.version += 1
        stashed = vcs.stash.pop(id(task), None)
        if stashed is not None:  # an eviction undone
            vcs.restore(task, stashed)
            return
        jobs_spots = self.spots.get(task.job.name)
        spot = None if jobs_spots is None else jobs_spots.pop(task.node, None)
        if spot is None:
            return
        owner = task.job.queue.name
        if task.status is TaskStatus.ALLOCATED and task.gpus != spot.gpus:
            spot = vcs.existing(owner, task)  # another plugin chose the cards
        if spot is not None:
            vcs.claim(task, spot, owner)

    def deallocated(self, task: TaskInfo) -> None:
        self.vcs.version += 1
        claim = self.vcs.unclaim(task)
        if claim is not None and task.status is TaskStatus.RELEASING:
            self.vcs.stash[id(task)] = claim


def _only(size: int, node: int) -> NDArray[np.bool_]:
    mask = np.zeros(size, dtype=np.bool_)
    mask[node] = True
    return mask
