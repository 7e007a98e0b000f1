"""random: a node chosen uniformly at random among those that fit, a card likewise.

The authors' Random baseline (Weng et al., ATC '23; ``pkg/simulator/plugin/
random_score.go`` picks one of the feasible nodes uniformly, and their ``random`` GPU
selection, ``allocateGpuIdBasedOnRandomFit`` in ``open_gpu_share.go``, one of the cards
that hold a share). Here every candidate node gets a uniform score in [0, 100), so the
best feasible one is a uniform pick among the feasible; a share of a GPU goes to a
uniformly chosen card that holds it; whole cards to the lowest-index free ones (as
theirs).

Guarantees: deterministic per ``seed`` (default 0): the scores and cards are a pure
function of seed, task name and node, never of the session or the clock; never picks a
card that cannot serve the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.gpufit.base import TieBreak
from phalanx.engine.snapshot import TaskInfo


class RandomPlugin(Plugin):
    """Uniform node among the feasible, uniform card among the fitting."""

    name = "random"
    accepted_args = frozenset({"weight", "seed"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__({"seed": 0, **dict(args or {})})

    def open(self, session: Session, hooks: Hooks) -> None:
        cards = session.snapshot.cards
        draw = TieBreak(self, len(session.snapshot.nodes))

        def score(task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
            return draw.uniform(task.name, nodes) * 100.0

        def select(task: TaskInfo, node: int) -> tuple[int, ...] | None:
            demand = task.role.cards
            if demand is None or not demand.shared:
                return None
            fitting = cards.fitting(demand, node)
            if fitting.size == 0:
                return None
            pick = draw.uniform(f"{task.name}@{node}", fitting.astype(np.intp))
            return (int(fitting[int(np.argmax(pick))]),)

        hooks.node_score(score, weight=self.number("weight", 1.0), node_local=True)
        hooks.gpu_select(select)
