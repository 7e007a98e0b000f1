"""gpu-topology: give a task the best-connected set of whole GPUs a node has free.

Inside a node the set is chosen by its slowest pair first (NVLink, then the same PCIe
switch, host bridge, NUMA node, across sockets: ``nvidia-smi topo -m``'s levels), then
by more NVLink pairs, then by fewer NUMA nodes (``GpuTopology.score``). Among equally
connected sets it takes the one that leaves the rest best: cards from the NUMA nodes
with the fewest free cards, with the fewest NVLinks to the cards left free, so whole
NVLink domains stay free for later tasks. Across nodes it prefers the node whose best
set is best connected. Tasks of a multi-node job hold the NICs nearest their GPUs
alone (the engine's card rule); the bind names them.

Nodes without a known topology are left to other plugins (and the lowest-index cards).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from math import comb
from typing import Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.topology import GpuTopology, LinkLevel
from phalanx.engine.cards import CardDemand
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import Snapshot, TaskInfo

#: Above this many candidate sets, sets are grown greedily from each free card instead.
MAX_SETS: Final = 2000
#: Score of a node by the slowest link of its best set (100: NVLink ... SYS: 0).
_LEVEL_SCORE: Final = {
    level: 100.0 * (LinkLevel.SYS - level) / (LinkLevel.SYS - LinkLevel.NVLINK)
    for level in LinkLevel
}

Choice = tuple[tuple[int, ...], tuple[int, ...]]  # (sort key, the GPUs)


def best_set(
    topology: GpuTopology, free: Sequence[int], count: int, *, own_nics: bool = False
) -> Choice | None:
    """The best ``count`` of the ``free`` GPUs and its sort key (lower is better); None
    when fewer are free. With ``own_nics`` (a task of a multi-node job, which holds the
    NICs nearest its GPUs) sets reaching fewer NICs win among sets of the same link level,
    so NICs are left for other tasks. Deterministic: ties break on the lower GPU indexes."""
    if len(free) < count:
        return None
    free_set = frozenset(free)
    candidates = (
        combinations(sorted(free), count)
        if comb(len(free), count) <= MAX_SETS
        else _grown(topology, sorted(free), count)
    )
    best: Choice | None = None
    for chosen in candidates:
        level, *rest = topology.score(chosen).sort_key
        nics = len({topology.nearest_nic(g) for g in chosen}) if own_nics else 0
        key = (level, nics, *rest, *_leftover_key(topology, free_set, chosen), *chosen)
        if best is None or key < best[0]:
            best = (key, chosen)
    return best


def _leftover_key(
    topology: GpuTopology, free: frozenset[int], chosen: tuple[int, ...]
) -> tuple[int, int]:
    left = free - set(chosen)
    numa = {topology.numa[g] for g in chosen}
    free_in_domains = sum(1 for g in free if topology.numa[g] in numa)
    links_to_left = sum(1 for g in chosen for h in left if topology.links[g][h].is_nvlink)
    return (free_in_domains, links_to_left)


def _grown(topology: GpuTopology, free: list[int], count: int) -> list[tuple[int, ...]]:
    """One set per free card: grown by adding the card with the best link to the set."""
    sets = []
    for seed in free:
        chosen = [seed]
        while len(chosen) < count:
            rest = [g for g in free if g not in chosen]
            chosen.append(
                min(rest, key=lambda g: (max(topology.links[c][g].rank for c in chosen), g))
            )
        sets.append(tuple(sorted(chosen)))
    return sorted(set(sets))


class _Choices:
    """One session's cards and topologies, and the best set per (topology, demand, free
    cards), each found on first use."""

    def __init__(self, session: Session) -> None:
        self.cards = session.snapshot.cards
        self.topologies = session.kept.get(_topologies, Lifetime.FIXED)
        self.known: dict[tuple[int, int, bool, bytes], Choice | None] = {}

    def choose(self, node: int, free: NDArray[np.bool_], demand: CardDemand) -> Choice | None:
        """The best set of ``free`` cards of ``node`` for ``demand``."""
        kind = int(self.topologies.kind[node])
        key = (kind, demand.whole, demand.exclusive_nic, np.packbits(free).tobytes())
        if key not in self.known:
            self.known[key] = best_set(
                self.topologies.distinct[kind],
                np.flatnonzero(free).tolist(),
                demand.whole,
                own_nics=demand.exclusive_nic,
            )
        return self.known[key]


def _whole(task: TaskInfo) -> int:
    demand = task.role.cards
    return 0 if demand is None or demand.shared else demand.whole


class GpuTopologyPlugin(Plugin[_Choices]):
    """Whole-GPU tasks get the best-connected free GPU set; nodes are ranked by it."""

    name = "gpu-topology"
    accepted_args = frozenset({"weight"})

    def open(self, session: Session) -> _Choices:
        return _Choices(session)

    def gpu_select(self, state: _Choices, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        count = _whole(task)
        if not count or state.topologies.kind[node] < 0:
            return None
        assert task.role.cards is not None
        free = state.cards.usable(task.role.cards, slice(node, node + 1))[0]
        found = state.choose(node, free, task.role.cards)
        return None if found is None else found[1]

    def node_score(
        self, state: _Choices, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        count = _whole(task)
        scores = np.zeros(len(nodes))
        if count < 2:
            return scores
        assert task.role.cards is not None
        topologies = state.topologies
        with_topology = np.flatnonzero(topologies.kind[nodes] >= 0)
        if not with_topology.size:
            return scores
        usable = state.cards.usable(task.role.cards, nodes[with_topology])
        # one evaluation per distinct (topology, free cards): nodes repeat a few states
        states = np.column_stack(
            (topologies.kind[nodes[with_topology]], np.packbits(usable, axis=1))
        )
        distinct, first, inverse = np.unique(states, axis=0, return_index=True, return_inverse=True)
        values = np.zeros(len(distinct))
        for j, row in enumerate(first):
            found = state.choose(int(nodes[with_topology[row]]), usable[row], task.role.cards)
            if found is not None:
                values[j] = _LEVEL_SCORE[LinkLevel(found[0][0])]
        scores[with_topology] = values[inverse.ravel()]
        return scores


class _Topologies:
    """The distinct GPU topologies of a snapshot's nodes and which one each node has."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.distinct: list[GpuTopology] = []
        index: dict[GpuTopology, int] = {}
        kinds = []
        for node in snapshot.nodes:
            topology = node.gpu_topology
            if topology is None:
                kinds.append(-1)
                continue
            if topology not in index:
                index[topology] = len(self.distinct)
                self.distinct.append(topology)
            kinds.append(index[topology])
        self.kind: NDArray[np.intp] = np.array(kinds, dtype=np.intp)


def _topologies(snapshot: Snapshot) -> _Topologies:
    return _Topologies(snapshot)
