"""A task class's node scores, kept through a session and from one session to the next.

Placement scores every candidate node once per class of tasks it places; the next job
of the same class (same request, card demand and tolerations) needs the same scores
but on the nodes whose usage changed since. With every scorer promising ``per_class``
(see ``Scorer``), ``ClassScores`` keeps each class's scores per node and scores again
only the nodes ``Snapshot.changed_nodes`` names: the scores it gives are the very
floats the scorers would give now. A driver that keeps its snapshot between sessions
keeps one ``ClassScores`` per config in its ``KeptState`` (``framework.kept``); the
kept scores are dropped when the scorers' basis (``ScorePoint.basis``: their plugins,
weights and, say, the target a plugin learnt) is not the one they were computed on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import EngineInvariantError
from phalanx.engine.framework.extension import ScorePoint
from phalanx.engine.snapshot import Snapshot, TaskInfo

#: task classes whose scores are kept, the most recently used (a node-long row each)
CLASSES_KEPT = 128


@dataclass(slots=True)
class _Kept:
    """One class's scores per node (NaN: not known), as of the snapshot's ``seen`` changes."""

    values: NDArray[np.float64]
    seen: int


class ClassScores:
    """The node scores of task classes over one snapshot, kept up to date."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._point: ScorePoint | None = None
        self._basis: tuple[object, ...] | None = None
        self._checked = False  # whether this session's basis was compared with the kept one
        self._kept: dict[tuple[object, ...], _Kept] = {}

    def open(self, point: ScorePoint) -> None:
        """Score with ``point`` (a new session's scorers) from now on."""
        self._point = point
        self._checked = False

    def __call__(self, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """The scores of ``nodes`` for ``task``, as the session's ``point(task, nodes)``
        gives them now."""
        point = self._point
        if point is None:
            raise EngineInvariantError("ClassScores used before a session opened it")
        snapshot, role = self.snapshot, task.role
        if not point.per_class:
            return point(task, nodes)
        if not self._checked:  # asked at first use: a basis may be learnt on first use
            basis = point.basis()
            if basis != self._basis:
                self._kept.clear()
                self._basis = basis
            self._checked = True
        key = (role.row, role.cards, role.spec.tolerations)
        kept = self._kept.pop(key, None)  # re-inserted: the dict runs least recent first
        if kept is None:
            if len(self._kept) >= CLASSES_KEPT:
                del self._kept[next(iter(self._kept))]
            kept = _Kept(np.full(len(snapshot.nodes), np.nan), snapshot.changes)
        else:
            kept.values[snapshot.changed_nodes(kept.seen)] = np.nan
            kept.seen = snapshot.changes
        self._kept[key] = kept
        values = kept.values[nodes]
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:
            fresh = point(task, nodes[missing])
            values[missing] = fresh
            kept.values[nodes[missing]] = fresh
        return values
