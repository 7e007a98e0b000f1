"""colocation: online services and offline batch work share nodes (Baidu's GPU colocation).

Online jobs avoid nodes that already run online work (anti-affinity: one service's peak
does not meet another's on the same GPUs); offline jobs prefer nodes that run online
work, filling the room services leave in their troughs. Both are node scores with a
default weight of 10, so on their own they outweigh the 0..100 of one other plugin at
weight 1: an online task lands next to another online task only when no node without
one fits it. Jobs without a service class are not scored.

The SLA watermark (offline work pauses while online load is above it) is enforced where
work runs: the simulator slows offline progress, the local executor stops offline
processes (SIGSTOP) and resumes them (SIGCONT) from a measured load signal.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import ServiceClass
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import ON_NODE, Snapshot, TaskInfo


class _Online:
    """Online tasks per node, kept up to date through one session."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.count = np.zeros(len(snapshot.nodes), dtype=np.int64)  # online tasks per node
        for job in snapshot.jobs.values():
            if job.spec.service_class is ServiceClass.ONLINE:
                for task in job.tasks:
                    if task.status in ON_NODE:
                        self.count[task.node] += 1
        self.placed: dict[int, int] = {}  # id(task) -> node, online tasks placed this session


class ColocationPlugin(Plugin[_Online]):
    """Online tasks spread away from online work; offline tasks pack next to it."""

    name = "colocation"
    accepted_args = frozenset({"weight"})
    default_weight = 10.0

    def open(self, session: Session) -> _Online:
        return _Online(session.snapshot)

    def node_score(
        self, state: _Online, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        kind = task.job.spec.service_class
        if kind is None:
            return np.zeros(len(nodes))
        busy = state.count[nodes] > 0
        wanted = busy if kind is ServiceClass.OFFLINE else ~busy
        result: NDArray[np.float64] = np.where(wanted, 100.0, 0.0)
        return result

    def on_allocate(self, state: _Online, task: TaskInfo) -> None:
        if task.job.spec.service_class is ServiceClass.ONLINE and task.node >= 0:
            state.placed[id(task)] = task.node
            state.count[task.node] += 1

    def on_deallocate(self, state: _Online, task: TaskInfo) -> None:
        if task.job.spec.service_class is not ServiceClass.ONLINE:
            return
        node = state.placed.pop(id(task), task.node)  # an undone allocation has left its node
        if node >= 0:
            state.count[node] -= 1
