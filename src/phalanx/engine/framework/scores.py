"""A task class's node scores, kept through a session.

Placement scores every candidate node once per class of tasks it places; the next job
of the same class (same request, card demand and tolerations) in the session needs the
same scores but on the nodes whose usage changed since. With every scorer promising
``per_class`` (see ``Scorer``), ``ClassScores`` keeps each class's scores per node and
scores again only the nodes ``Snapshot.changed_nodes`` names: the scores it gives are
the very floats the scorers would give now. Lives as long as its session.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.framework.extension import ScorePoint
from phalanx.engine.snapshot import Snapshot, TaskInfo


@dataclass(slots=True)
class _Kept:
    """One class's scores per node (NaN: not known), as of the snapshot's ``seen`` changes."""

    values: NDArray[np.float64]
    seen: int


class ClassScores:
    """The node scores of task classes over a session's snapshot, kept up to date."""

    def __init__(self, snapshot: Snapshot, point: ScorePoint) -> None:
        self._snapshot = snapshot
        self._point = point
        self._kept: dict[tuple[object, ...], _Kept] = {}

    def __call__(self, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """The scores of ``nodes`` for ``task``, as ``point(task, nodes)`` gives them now."""
        snapshot, role = self._snapshot, task.role
        row = snapshot.request_ids.get(id(role.request))  # None: a request row of no role
        if row is None or not self._point.per_class:
            return self._point(task, nodes)
        key = (row, role.cards, role.spec.tolerations)
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = _Kept(np.full(len(snapshot.nodes), np.nan), snapshot.changes)
        else:
            kept.values[snapshot.changed_nodes(kept.seen)] = np.nan
            kept.seen = snapshot.changes
        values = kept.values[nodes]
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:
            fresh = self._point(task, nodes[missing])
            values[missing] = fresh
            kept.values[nodes[missing]] = fresh
        return values
