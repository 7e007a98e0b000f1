"""binpack and spread: score nodes by how full they would be after placing the task.

binpack prefers the fullest node that fits (fewer fragments, whole nodes left free for
large gangs); spread prefers the emptiest. Weights are per resource name; GPU weighs
most by default. Scores are 0..100 and depend only on the node itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import Snapshot, TaskInfo

DEFAULT_WEIGHTS = {"cpu": 1.0, "memory": 1.0, "gpu": 5.0}


class _Fill:
    """One session's snapshot, resource weights and, per request row, the weights of the
    resources it asks for (100 in all, normalised)."""

    def __init__(self, session: Session, weights: Mapping[str, float]) -> None:
        self.snap = session.snapshot
        self.row = np.array([weights.get(name, 0.0) for name in self.snap.dims])
        self.inverse = session.kept.get(_inverse_capacity, Lifetime.FIXED)
        self.weighting: dict[int, NDArray[np.float64] | None] = {}

    def weights_of(self, request: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """The request's normalised weights, None when it asks for no weighed resource."""
        key = id(request)  # rows are shared per distinct request and live with the snapshot
        if key not in self.weighting:
            w = np.where(request > 0, self.row, 0.0)
            total = w.sum()
            self.weighting[key] = None if total == 0 else w * (100.0 / total)
        return self.weighting[key]


class _Utilization(Plugin[_Fill]):
    accepted_args = frozenset({"weight", "weights", "cpu", "memory", "gpu"})
    prefer_full = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        weights: dict[str, float] = dict(DEFAULT_WEIGHTS)
        extra = self.args.get("weights", {})
        if not isinstance(extra, Mapping):
            raise PluginError(f"plugin {self.name!r}: weights must be a map of resource -> number")
        for key in ("cpu", "memory", "gpu"):
            if key in self.args:
                weights[key] = self.number(key, 0.0)
        for key, value in extra.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise PluginError(f"plugin {self.name!r}: weight of {key!r} must be a number >= 0")
            weights[str(key)] = float(value)
        self.weights = weights

    def open(self, session: Session) -> _Fill:
        return _Fill(session, self.weights)

    def node_score(
        self, state: _Fill, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        request = task.role.request
        w = state.weights_of(request)
        if w is None:
            return np.zeros(len(nodes))
        fill = np.minimum((state.snap.used[nodes] + request) * state.inverse[nodes], 1.0) @ w
        result: NDArray[np.float64] = fill if self.prefer_full else 100.0 - fill
        return result


class BinpackPlugin(_Utilization):
    """Prefer the fullest node that fits."""

    name = "binpack"
    prefer_full = True
    promises = ScorePromises(fills=True)


class SpreadPlugin(_Utilization):
    """Prefer the emptiest node that fits."""

    name = "spread"
    prefer_full = False


def _inverse_capacity(snapshot: Snapshot) -> NDArray[np.float64]:
    """1 / capacity per node and resource (0 where a node has none of it)."""
    capacity = snapshot.capacity
    inverse: NDArray[np.float64] = np.divide(
        1.0, capacity, out=np.zeros_like(capacity), where=capacity > 0
    )
    return inverse
