"""network-topology: keep a gang under the lowest common switch that fits it.

Volcano's HyperNodes and Kueue's Topology-Aware Scheduling, over the tiers nodes carry
in ``Node.network`` (``tor``, then ``spine`` ...: the ``tiers`` arg, lowest first).
A job with ``network`` set (or, with the ``default_tier`` arg, every multi-task job,
softly) is confined through the ``confinement`` point:

- the switches of the lowest tier come first, then each tier up to the job's ``tier``;
  at each tier only switches with room for the whole gang (or group) are offered,
  the best fit first: the least free capacity left after placing, ties by name;
- ``soft`` then offers the fewest switches of the lowest tier that together have room
  (the roomiest first), and finally the whole cluster;
- ``hard`` offers nothing more: a gang no switch can hold stays pending with a reason
  naming what it needs and the most the roomiest switch has;
- with ``group``, each group of tasks gets its own offer, made after earlier groups
  took their room (the framework places them one by one in one statement);
- reclaim and preempt make room by the same offers, the victims' room counted as
  free, so a hard gang is never pipelined across switches.

Room is an upper bound counted per switch with vectorised sums over nodes (each
role's task count per node, and the free resources); placement itself has the last
word, so an offered switch that turns out short is undone and the next one tried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.domain.job import NetworkPlacement
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.confinement import Confinement, ConfinementOffer, ConfinementQuery
from phalanx.engine.framework.kept import KeptState, Lifetime
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EPSILON, JobInfo, Snapshot

DEFAULT_TIERS: Final = ("tor", "spine")
#: Most switches offered per tier: each failed offer costs a placement attempt.
MAX_OFFERS: Final = 8


@dataclass(frozen=True, slots=True)
class _Tier:
    """One tier's switches: ``ids[node]`` indexes ``names`` (sorted), -1 without one."""

    names: tuple[str, ...]
    ids: NDArray[np.intp]


def _tier(snapshot: Snapshot, tier: str) -> _Tier:
    column = [node.network.get(tier) for node in snapshot.nodes]
    names = tuple(sorted({name for name in column if name is not None}))
    index = {name: i for i, name in enumerate(names)}
    ids = np.array([-1 if name is None else index[name] for name in column], dtype=np.intp)
    ids.flags.writeable = False
    return _Tier(names, ids)


def _cached_tier(kept: KeptState, tier: str) -> _Tier:
    """The tier's switch index per node, built once per snapshot."""
    return kept.get(_tier, Lifetime.FIXED, tier)


@dataclass(frozen=True, slots=True)
class _Room:
    """Per switch of one tier: tasks of the gang it can hold, and the fit after placing."""

    held: NDArray[np.float64]  # tasks it can hold, at most the gang's
    fits: NDArray[np.bool_]  # room for every task
    leftover: NDArray[np.float64]  # free capacity left after placing, in gangs


class _Demand:
    """What one query asks for, per node: tasks of each role that fit, and free room."""

    def __init__(self, session: Session, query: ConfinementQuery) -> None:
        counts: dict[int, int] = {}
        for task in query.tasks:
            counts[task.role.index] = counts.get(task.role.index, 0) + 1
        roles = [query.job.roles[index] for index in sorted(counts)]
        self.size = len(query.tasks)
        self.counts = np.array([counts[role.index] for role in roles], dtype=np.float64)
        self.text = " + ".join(
            f"{counts[role.index]} x {_described(role.resources.describe())}" for role in roles
        )
        total = np.zeros(query.free.shape[1])
        for role in roles:
            total += role.request * counts[role.index]
        self.need = np.flatnonzero(total > 0)
        self.total = total[self.need]
        usable = np.zeros(len(query.slots), dtype=np.bool_)
        self.per_node = np.zeros((len(roles), len(query.slots)))
        for r, role in enumerate(roles):
            mask = session.static_mask(role)[0]
            usable |= mask
            wanted = np.flatnonzero(role.request > 0)
            fit = np.array(query.slots, dtype=np.float64)
            if wanted.size:
                ratio = (query.free[:, wanted] + EPSILON) / role.request[wanted]
                fit = np.minimum(fit, np.floor(ratio.min(axis=1)))
            self.per_node[r] = np.where(mask, np.clip(fit, 0.0, self.size), 0.0)
        self.free = np.where(usable[:, None], query.free[:, self.need], 0.0)

    def room(self, tier: _Tier) -> _Room:
        """Vectorised over the tier's switches (sums over their nodes)."""
        on = tier.ids >= 0
        ids, size = tier.ids[on], len(tier.names)
        tasks = _sums(ids, self.per_node[:, on], size)
        free = _sums(ids, self.free[on].T, size)
        capped = np.minimum(tasks, self.counts[:, None])
        enough = (self.total <= free.T + EPSILON).all(axis=1)
        fits: NDArray[np.bool_] = np.logical_and(
            (tasks >= self.counts[:, None]).all(axis=0), enough
        )
        leftover = (
            ((free.T - self.total) / self.total).sum(axis=1) if self.need.size else tasks.sum(0)
        )
        return _Room(held=capped.sum(axis=0), fits=fits, leftover=leftover)


def _sums(ids: NDArray[np.intp], rows: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    """``rows`` (K x nodes) summed per switch: K x ``size``."""
    out = np.zeros((len(rows), size))
    for k, row in enumerate(rows):
        out[k] = np.bincount(ids, weights=row, minlength=size)
    return out


def _described(text: str) -> str:
    return f"({text})" if ", " in text else text


class _Tiers:
    """One session: the tiers' switch indexes, and one rule per network placement."""

    def __init__(self, session: Session, tiers: Sequence[str]) -> None:
        self.session = session
        self.tiers = {t: _cached_tier(session.kept, t) for t in tiers}
        self.rules: dict[NetworkPlacement, Confinement] = {}


class NetworkTopologyPlugin(Plugin[_Tiers]):
    """Confines jobs with a network placement to the fewest, tightest switches."""

    name = "network-topology"
    accepted_args = frozenset({"tiers", "default_tier"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        tiers = self.args.get("tiers", list(DEFAULT_TIERS))
        if (
            not isinstance(tiers, list | tuple)
            or not tiers
            or not all(isinstance(t, str) and t for t in tiers)
            or len(set(tiers)) != len(tiers)
        ):
            raise PluginError(
                f"plugin {self.name!r}: arg 'tiers' must be a list of distinct tier names, "
                f"lowest first (such as [tor, spine]), got {tiers!r}"
            )
        self.tiers: tuple[str, ...] = tuple(tiers)
        default = self.args.get("default_tier")
        if default is not None and default not in self.tiers:
            raise PluginError(
                f"plugin {self.name!r}: arg 'default_tier' must be one of the tiers "
                f"({', '.join(self.tiers)}), got {default!r}"
            )
        self.default = None if default is None else NetworkPlacement(tier=default, mode="soft")

    def open(self, session: Session) -> _Tiers:
        return _Tiers(session, self.tiers)

    def job_valid(self, state: _Tiers, job: JobInfo) -> str | None:
        wanted = job.spec.network
        if wanted is None or wanted.tier in state.tiers:
            return None
        return (
            f"networkTopology.tier {wanted.tier!r} is not a network tier of this scheduler; "
            f"fix: use one of {', '.join(self.tiers)} (the network-topology plugin's tiers)"
        )

    def confinement(self, state: _Tiers, job: JobInfo) -> Confinement | None:
        placement = self._placement_of(job)
        if placement is None or placement.tier not in state.tiers:
            return None
        if placement not in state.rules:
            state.rules[placement] = Confinement(
                key=(self.name, placement),
                group=placement.group,
                offer=lambda query: self._offer(state.session, state.tiers, placement, query),
            )
        return state.rules[placement]

    def _placement_of(self, job: JobInfo) -> NetworkPlacement | None:
        if job.spec.network is not None:
            return job.spec.network
        return self.default if len(job.tasks) > 1 else None

    def _offer(
        self,
        session: Session,
        tiers: Mapping[str, _Tier],
        placement: NetworkPlacement,
        query: ConfinementQuery,
    ) -> ConfinementOffer:
        demand = _Demand(session, query)
        levels = self.tiers[: self.tiers.index(placement.tier) + 1]
        masks: list[NDArray[np.bool_]] = []
        rooms = {}
        for level in levels:
            tier = tiers[level]
            room = rooms[level] = demand.room(tier)
            fitting = np.flatnonzero(room.fits)
            best = fitting[np.argsort(room.leftover[fitting], kind="stable")][:MAX_OFFERS]
            masks.extend(tier.ids == switch for switch in best)
        if placement.mode == "soft":
            lowest = tiers[levels[0]]
            fewest = _fewest(lowest, rooms[levels[0]], demand.size)
            if fewest is not None:
                masks.append(fewest)
            masks.append(np.ones(len(query.slots), dtype=np.bool_))
            return ConfinementOffer(masks=tuple(masks))
        reason = None if masks else self._refusal(placement, levels, tiers, rooms, demand)
        return ConfinementOffer(masks=tuple(masks), reason=reason)

    def _refusal(
        self,
        placement: NetworkPlacement,
        levels: Sequence[str],
        tiers: Mapping[str, _Tier],
        rooms: Mapping[str, _Room],
        demand: _Demand,
    ) -> Reason:
        """Why no switch can hold the gang (hard mode), and what a person can change."""
        what = "group" if placement.group is not None else "gang"
        top = levels[-1]
        if not tiers[top].names:
            return Reason(
                code=ReasonCode.NO_MATCHING_NODE,
                message=f"{what} of {demand.size} tasks must sit under one {top} but no node "
                f"has a {top} switch; fix: give the nodes their place in the network "
                f"(Cluster nodeGroups[].network.{top}) or remove spec.networkTopology",
            )
        largest = int(rooms[top].held.max())
        higher = self.tiers.index(top) + 1
        fixes = ["wait for running tasks to end", "set networkTopology.mode: soft"]
        if higher < len(self.tiers):
            fixes.append(f"allow a higher tier (networkTopology.tier: {self.tiers[higher]})")
        if placement.group is None:
            fixes.append(f"lower the replicas to {largest}" if largest else "use fewer tasks")
        else:
            fixes.append("use a smaller groupSize")
        return Reason(
            code=ReasonCode.GANG,
            message=f"{what} of {demand.size} tasks needs one {' or '.join(levels)} with "
            f"{demand.text} free; the largest {top} has room for {largest}; "
            f"fix: {', '.join(fixes[:-1])} or {fixes[-1]}",
        )


def _fewest(tier: _Tier, room: _Room, size: int) -> NDArray[np.bool_] | None:
    """The fewest switches that together hold ``size`` tasks, the roomiest first (ties
    by name), as a node mask; None when all of them together cannot."""
    order = np.argsort(-room.held, kind="stable")
    total = np.cumsum(room.held[order])
    enough = np.flatnonzero(total >= size)
    if not enough.size:
        return None
    chosen = order[: int(enough[0]) + 1]
    mask: NDArray[np.bool_] = np.isin(tier.ids, chosen)
    return mask
