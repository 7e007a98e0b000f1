"""gpu-share: pack shares of GPUs card by card.

A task asking for a share of one GPU (``gpu: 0.5``, ``gpu-memory: 10Gi``) goes to the
fullest card that still fits it, on the node whose best such card is fullest, so a
new card is opened only when no partly used card has room (Alibaba's gpushare and
Baidu's cGPU binpack the same way). Whole-GPU tasks are left to other plugins. The
bind carries the share's isolation (MPS percentage, memory limit) for the executor.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import WHOLE, Cards
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import TaskInfo


class GpuSharePlugin(Plugin[Cards]):
    """Shares of one GPU go to the fullest card that fits them."""

    name = "gpu-share"
    accepted_args = frozenset({"weight"})

    def open(self, session: Session) -> Cards:
        return session.snapshot.cards

    def gpu_select(self, state: Cards, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        filled = _fullness(state, task, np.array([node], dtype=np.intp))
        if filled is None or filled.max() < 0:
            return None
        return (int(np.argmax(filled[0])),)  # argmax: the lowest index among the fullest

    def node_score(
        self, state: Cards, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        filled = _fullness(state, task, nodes)
        if filled is None or filled.shape[1] == 0:
            return np.zeros(len(nodes))
        best: NDArray[np.float64] = np.clip(filled.max(axis=1), 0.0, 1.0) * 100.0
        return best


def _fullness(cards: Cards, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64] | None:
    """Per node and card: how full the card would be with the task (-1: it does not fit)."""
    demand = task.role.cards
    if demand is None or not demand.shared:
        return None
    usable = cards.usable(demand, nodes)
    used = (WHOLE - cards.milli_free[nodes] + demand.milli) / WHOLE
    capacity = cards.memory_capacity[nodes]
    memory = np.divide(
        capacity - cards.memory_free[nodes] + demand.memory,
        capacity,
        out=np.zeros_like(capacity),
        where=capacity > 0,
    )
    filled: NDArray[np.float64] = np.where(usable, np.maximum(used, memory), -1.0)
    return filled
