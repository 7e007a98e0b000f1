"""balanced: nodes whose resources stay evenly used, Kubernetes' BalancedAllocation.

kube-scheduler's ``NodeResourcesBalancedAllocation`` scores a node by how evenly the
task would leave its resources used: with ``f_r`` the share of resource ``r`` in use
after placing the task, the score is ``100 x (1 - std(f_r))`` over the resources (by
default cpu, memory and gpu) that the node has. A node whose GPUs are gone but whose
CPU is idle is where a CPU-only task belongs, and a node short of CPU is where a GPU
task belongs: so CPU is not spent where it strands free GPUs, nor GPUs where they
strand free CPU.

Guarantees: scores in 0..100; a node's score depends only on that node; a node with
none of the resources scores 100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import TaskInfo

DEFAULT_RESOURCES = ("cpu", "memory", "gpu")


class BalancedPlugin(Plugin):
    """Prefer the node whose resources the task leaves most evenly used."""

    name = "balanced"
    accepted_args = frozenset({"weight", "resources"})

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

    def open(self, session: Session, hooks: Hooks) -> None:
        snap = session.snapshot
        columns = [snap.dim[r] for r in self.resources if r in snap.dim]
        capacity = snap.capacity[:, columns]
        present = capacity > 0
        counted = present.sum(axis=1)

        def score(task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
            if not columns:
                return np.full(len(nodes), 100.0)
            used = snap.used[nodes][:, columns] + task.request[columns]
            cap = capacity[nodes]
            share = np.divide(used, cap, out=np.zeros_like(used), where=present[nodes])
            share = np.minimum(share, 1.0)
            n = np.maximum(counted[nodes], 1)
            mean = share.sum(axis=1) / n
            spread = np.where(present[nodes], (share - mean[:, np.newaxis]) ** 2, 0.0)
            std = np.sqrt(spread.sum(axis=1) / n)
            result: NDArray[np.float64] = 100.0 * (1.0 - std)
            return result

        hooks.node_score(score, weight=self.number("weight", 1.0), node_local=True)
