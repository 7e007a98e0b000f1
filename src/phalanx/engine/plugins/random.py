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
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import Cards
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.gpufit.base import TieBreak
from phalanx.engine.snapshot import TaskInfo


@dataclass(frozen=True, slots=True)
class _Draws:
    """One session's cards and seeded draws."""

    cards: Cards
    draw: TieBreak


class RandomPlugin(Plugin[_Draws]):
    """Uniform node among the feasible, uniform card among the fitting."""

    name = "random"
    accepted_args = frozenset({"weight", "seed"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__({"seed": 0, **dict(args or {})})

    def open(self, session: Session) -> _Draws:
        return _Draws(session.snapshot.cards, TieBreak(self, len(session.snapshot.nodes)))

    def node_score(
        self, state: _Draws, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        return state.draw.uniform(task.name, nodes) * 100.0

    def gpu_select(self, state: _Draws, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        demand = task.role.cards
        if demand is None or not demand.shared:
            return None
        fitting = state.cards.fitting(demand, node)
        if fitting.size == 0:
            return None
        pick = state.draw.uniform(f"{task.name}@{node}", fitting.astype(np.intp))
        return (int(fitting[int(np.argmax(pick))]),)
