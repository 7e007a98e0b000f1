"""gpuclustering: keep tasks of one GPU shape together on the same nodes.

The authors' GPU-Clustering baseline (Weng et al., ATC '23; ``pkg/simulator/plugin/
gpu_clustering_score.go`` of ``hkust-adsl/kubernetes-scheduler-simulator``). A task's
GPU shape is ``share`` (a fraction of one card) or ``k-gpu`` (k whole cards); a node's
shapes are those of the GPU tasks on it. With ``used = 25 x (8000 - free milli-GPU) //
8000`` (integer division, as theirs), a node scores

- ``75 + used`` when it runs only tasks of the task's shape,
- ``50 + used`` when it runs that shape and others,
- ``25 + used`` when it runs no GPU task,
- ``used`` when it runs only other shapes;

a task without GPU scores 0 everywhere. A share goes to the fullest card that holds it
(their ``best`` GPU selection); whole cards to the lowest-index free ones.

Guarantees: integer scores in 0..100 (plus, with ``seed``, a tie-break below half a
point: a seeded random node order, the same for every task); the shapes on a node are
those of the tasks on it at this moment of the session (allocations, evictions and
discards included); never picks a card that cannot serve the task.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import CardDemand
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.gpufit.base import MAX_SPEC_GPU, Fit, GpuFitPlugin, free_gpu_milli
from phalanx.engine.snapshot import ON_NODE, Snapshot, TaskInfo


def shape_tag(demand: CardDemand) -> str:
    """The authors' GPU affinity of a task: ``share`` or ``<k>-gpu``."""
    return "share" if demand.shared else f"{demand.whole}-gpu"


class _Shapes:
    """How many tasks of each GPU shape every node runs, kept up to date in a session."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.tags: dict[str, int] = {}
        self.counts = np.zeros((len(snapshot.nodes), 4), dtype=np.int64)
        self.held: dict[int, tuple[int, int]] = {}  # id(task) -> (node, tag column)
        for job in snapshot.jobs.values():
            for task in job.tasks:
                self.add(task)

    def column(self, tag: str) -> int:
        if tag not in self.tags:
            self.tags[tag] = len(self.tags)
            if len(self.tags) > self.counts.shape[1]:
                grown = np.zeros((self.counts.shape[0], 2 * self.counts.shape[1]), np.int64)
                grown[:, : self.counts.shape[1]] = self.counts
                self.counts = grown
        return self.tags[tag]

    def add(self, task: TaskInfo) -> None:
        demand = task.role.cards
        if demand is None or task.status not in ON_NODE or id(task) in self.held:
            return
        column = self.column(shape_tag(demand))
        self.counts[task.node, column] += 1
        self.held[id(task)] = (task.node, column)

    def remove(self, task: TaskInfo) -> None:
        held = self.held.pop(id(task), None)
        if held is not None and task.status not in ON_NODE:
            self.counts[held] -= 1
        elif held is not None:
            self.held[id(task)] = held  # still on its node (releasing): keeps its shape


class _Clustered(Fit):
    """A session's state, with the shapes on each node built on first use: a session may
    never score a GPU task."""

    __slots__ = ("shapes",)

    def __init__(self, fit: Fit) -> None:
        super().__init__(fit.snapshot, fit.ties)
        self.shapes: _Shapes | None = None

    def table(self) -> _Shapes:
        """The shapes on each node, kept up to date from their first use."""
        if self.shapes is None:
            self.shapes = _Shapes(self.snapshot)
        return self.shapes


class GpuClusteringPlugin(GpuFitPlugin[_Clustered]):
    """Nodes that run only the task's GPU shape first, then mixed, then idle, then others."""

    name = "gpuclustering"

    def open(self, session: Session) -> _Clustered:
        return _Clustered(Fit.of(self, session))

    def points(
        self, state: _Clustered, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        demand = task.role.cards
        if demand is None:
            return np.zeros(len(nodes))  # 0 everywhere: the tie-break decides
        known = state.table()
        counts = known.counts[nodes]
        kinds = (counts > 0).sum(axis=1)
        column = known.tags.get(shape_tag(demand))
        mine = counts[:, column] > 0 if column is not None else np.zeros(len(nodes), bool)
        left = free_gpu_milli(state.snapshot.cards, nodes)
        used = np.floor(25.0 * (MAX_SPEC_GPU - left) / MAX_SPEC_GPU)
        band = np.where(mine, np.where(kinds == 1, 75.0, 50.0), np.where(kinds == 0, 25.0, 0.0))
        fit: NDArray[np.float64] = band + used
        return fit

    def on_allocate(self, state: _Clustered, task: TaskInfo) -> None:
        if state.shapes is not None:
            state.shapes.add(task)

    def on_deallocate(self, state: _Clustered, task: TaskInfo) -> None:
        if state.shapes is not None:
            state.shapes.remove(task)
