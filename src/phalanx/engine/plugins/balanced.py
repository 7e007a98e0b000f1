"""balanced: placements that leave a node's resources more evenly used than before.

With ``f_r`` the share of resource ``r`` of a node in use and ``std`` their standard
deviation over the resources the node has (by default cpu, memory and gpu), a node
scores ``50 + 100 x (std before - std after placing the task)``: above 50 when the task
evens the node out, below when it skews it. A CPU-only task goes where the GPUs are
taken and the CPU idles, a GPU task where the CPU is taken and the GPUs idle: neither
strands the other resource.

kube-scheduler's ``NodeResourcesBalancedAllocation`` scores the balance after
placement instead (``100 x (1 - std after)``). That keeps adding to nodes that are
balanced already and leaves a skewed node skewed: on the openb trace it sent CPU-only
pods to half-used 8-GPU nodes, whose CPU ran out with GPUs still free, rather than to
2-GPU nodes with their GPUs taken and most of their 104 cores idle.

Guarantees: scores in 0..100; a node's score depends only on that node; a node with
none of the resources scores 50. Performance: the spread before placement is kept per
snapshot and recomputed only for the nodes whose usage changed (``changed_nodes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import Snapshot, TaskInfo

DEFAULT_RESOURCES = ("cpu", "memory", "gpu")


@dataclass(frozen=True, slots=True)
class _Open:
    """One session's snapshot and the spreads kept for it."""

    snap: Snapshot
    spreads: _Spreads


class BalancedPlugin(Plugin[_Open]):
    """Prefer the node whose resources the task evens out most."""

    name = "balanced"
    accepted_args = frozenset({"weight", "resources"})
    promises = ScorePromises(per_class=True)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        resources = self.args.get("resources", DEFAULT_RESOURCES)
        if (
            isinstance(resources, str)
            or not isinstance(resources, Sequence)
            or not resources
            or not all(isinstance(r, str) for r in resources)
        ):
            raise PluginError(
                "plugin 'balanced': arg 'resources' must be a non-empty list of resource names"
            )
        self.resources = tuple(resources)

    def open(self, session: Session) -> _Open:
        spreads = session.kept.get(_Spreads, Lifetime.FOLLOWS, self.resources)
        return _Open(session.snapshot, spreads)

    def node_score(
        self, state: _Open, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        snap, spreads = state.snap, state.spreads
        if not spreads.columns.size:
            return np.full(len(nodes), 50.0)
        gain = spreads.now(snap)[nodes] - spreads.after(snap, task, nodes)
        result: NDArray[np.float64] = np.clip(50.0 + 100.0 * gain, 0.0, 100.0)
        return result

    def score_ahead(
        self, state: _Open, task: TaskInfo, node: int, count: int
    ) -> NDArray[np.float64]:
        if not state.spreads.columns.size:
            return np.full(count, 50.0)
        spread = state.spreads.ahead(state.snap, task, node, count)
        result: NDArray[np.float64] = np.clip(50.0 + 100.0 * (spread[:-1] - spread[1:]), 0.0, 100.0)
        return result


class _Spreads:
    """Per node of one snapshot, the spread of the shares of its resources in use: kept
    across sessions, recomputed only for the nodes whose use changed."""

    def __init__(self, snap: Snapshot, resources: Sequence[str]) -> None:
        self.columns = np.array([snap.dim[r] for r in resources if r in snap.dim], dtype=np.intp)
        capacity = snap.capacity[:, self.columns]
        present = capacity > 0
        self.present = present.astype(np.float64)
        self.inverse = np.divide(1.0, capacity, out=np.zeros_like(capacity), where=present)
        self.counted = np.maximum(present.sum(axis=1), 1).astype(np.float64)
        self._seen = -1  # the snapshot's ``changes`` when spreads were last brought up to date
        self._spread = np.zeros(len(capacity))

    def now(self, snap: Snapshot) -> NDArray[np.float64]:
        """Every node's spread as its resources are used now."""
        changed = snap.changed_nodes(self._seen)
        self._seen = snap.changes
        if changed.size:
            used = snap.used[changed[:, np.newaxis], self.columns]
            self._spread[changed] = self.spread(used, changed)
        return self._spread

    def after(self, snap: Snapshot, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """The spread of ``nodes`` once ``task`` is placed there."""
        used = snap.used[nodes[:, np.newaxis], self.columns] + task.request[self.columns]
        return self.spread(used, nodes)

    def ahead(self, snap: Snapshot, task: TaskInfo, node: int, count: int) -> NDArray[np.float64]:
        """The spread of ``node`` once 1, 2, .. ``count + 1`` more tasks like ``task`` are
        placed there, each added to the use before it as the snapshot adds them."""
        steps = np.empty((count + 2, self.columns.size))
        steps[0] = snap.used[node, self.columns]
        steps[1:] = task.request[self.columns]
        used = np.add.accumulate(steps, axis=0)[1:]
        return self.spread(used, np.full(count + 1, node, dtype=np.intp))

    def spread(self, used: NDArray[np.float64], nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """Standard deviation of the shares in use, over the resources each node has."""
        share = np.minimum(used * self.inverse[nodes], 1.0)
        counted = self.counted[nodes]
        mean = share.sum(axis=1) / counted
        square = (share - mean[:, np.newaxis]) ** 2 * self.present[nodes]
        std: NDArray[np.float64] = np.sqrt(square.sum(axis=1) / counted)
        return std
