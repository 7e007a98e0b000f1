"""reclaimable: spot-like capacity goes to elastic replicas first.

A node labelled ``phalanx.io/reclaimable: "true"`` may be taken back at short notice (a
spot or preemptible instance, capacity lent by another cluster). A replica of an
elastic role loses little when its node goes (the job runs on at a smaller size), so
elastic roles prefer such nodes and every other role avoids them: an elastic role's
task scores 100 on a reclaimable node and 0 elsewhere; any other task the reverse.
When such a node is drained its elastic replicas leave and their jobs run on.

Guarantees: a score depends on the task's role (elastic or not) and the node's label
only, so it is the same for every task of a class and never changes in a session.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import TaskInfo

#: The node label that marks spot-like capacity, and the value that says so.
RECLAIMABLE_LABEL: Final = "phalanx.io/reclaimable"


class ReclaimablePlugin(Plugin):
    """Elastic replicas to reclaimable nodes first; everything else away from them."""

    name = "reclaimable"
    accepted_args = frozenset({"weight"})

    def open(self, session: Session, hooks: Hooks) -> None:
        column = session.snapshot.label_column(RECLAIMABLE_LABEL)
        reclaimable = np.array([value == "true" for value in column], dtype=bool)
        if not reclaimable.any():
            return
        prefer = np.where(reclaimable, 100.0, 0.0)
        avoid = 100.0 - prefer

        def score(task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
            elastic = task.role.spec.elastic is not None
            return (prefer if elastic else avoid)[nodes]

        hooks.node_score(
            score,
            weight=self.number("weight", 1.0),
            per_class=True,
            basis=lambda: RECLAIMABLE_LABEL,
        )
