"""reclaimable: spot-like capacity goes to elastic replicas first.

A node labelled ``phalanx.io/reclaimable: "true"`` may be taken back at short notice (a
spot or preemptible instance, capacity lent by another cluster). A replica of an
elastic role loses little when its node goes (the job runs on at a smaller size), so
elastic roles prefer such nodes and every other role avoids them: an elastic role's
task scores 100 on a reclaimable node and 0 elsewhere; any other task the reverse.
When such a node is drained its elastic replicas leave and their jobs run on.

Guarantees: a score depends on the task's role (elastic or not) and the node's label
only, so it is the same for every task of a class and never changes in a session; on a
cluster without such nodes the plugin scores nothing.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.node import RECLAIMABLE_LABEL
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import Snapshot, TaskInfo

#: Per session: each node's score for an elastic role's task (100 where reclaimable).
_Prefer = NDArray[np.float64]


def _preferences(snapshot: Snapshot) -> _Prefer:
    """100 on each reclaimable node, 0 elsewhere (labels are fixed for the snapshot's life)."""
    column = snapshot.label_column(RECLAIMABLE_LABEL)
    scores = np.array([100.0 if value == "true" else 0.0 for value in column])
    scores.setflags(write=False)
    return scores


class ReclaimablePlugin(Plugin[_Prefer]):
    """Elastic replicas to reclaimable nodes first; everything else away from them."""

    name = "reclaimable"
    accepted_args = frozenset({"weight"})
    promises = ScorePromises(per_class=True)

    def open(self, session: Session) -> _Prefer:
        return session.kept.get(_preferences, Lifetime.FIXED)

    def skipped(self, state: _Prefer) -> tuple[str, ...]:
        """No score where no node is reclaimable."""
        return () if state.any() else ("node_score",)

    def node_score(
        self, state: _Prefer, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        scores = state if task.role.spec.elastic is not None else 100.0 - state
        return scores[nodes]

    def score_basis(self, state: _Prefer) -> object:
        """The labels: fixed for the snapshot's life."""
        return RECLAIMABLE_LABEL
