"""GPU fragmentation of a simulated cluster, measured as FGD does.

The measure itself (task shapes, target workloads, F_n(m), F_n(M), F(M) and the
ratios) is pure math the engine's ``fgd`` plugin needs too, so it lives in
``phalanx.engine.plugins.fgd`` (``workload``, ``fragmentation``) and is re-exported here under the same names. This
module adds what only the simulator needs: ``FragmentationProbe``, which measures a
simulated cluster against the task shapes of its workload.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phalanx.engine.cards import WHOLE
from phalanx.engine.plugins.fgd.fragmentation import (
    FragmentationSummary,
    cards_from_node_totals,
    fragmentation_summary,
    node_fragmentation,
    task_fragments,
)
from phalanx.engine.plugins.fgd.workload import (
    MILLI,
    TargetWorkload,
    TaskShape,
    workload_distribution,
)
from phalanx.engine.snapshot import Snapshot
from phalanx.sim.workload import Workload

__all__ = [
    "MILLI",
    "FragmentationProbe",
    "FragmentationSummary",
    "TargetWorkload",
    "TaskShape",
    "cards_from_node_totals",
    "fragmentation_summary",
    "node_fragmentation",
    "task_fragments",
    "workload_distribution",
]


@dataclass(frozen=True, slots=True)
class FragmentationProbe:
    """Measures a simulated cluster's fragmentation against its workload's task shapes.

    The target workload is every task of the workload (one shape per role replica), so
    the measure asks "how much free GPU could the tasks this cluster runs not use?".
    Per-card state is the snapshot's own (``Snapshot.cards``): what every bind held.
    """

    target: TargetWorkload
    gpu: int  # column of the GPU dimension in the snapshot
    cpu: int | None
    memory: int | None

    @classmethod
    def of(cls, snapshot: Snapshot, workload: Workload) -> FragmentationProbe | None:
        """A probe for ``snapshot``'s nodes; None when they have no GPU or no task asks any."""
        dims = list(snapshot.dims)
        if "gpu" not in dims or not snapshot.capacity[:, dims.index("gpu")].any():
            return None
        shapes = [
            TaskShape(
                cpu=role.resources.get("cpu"),
                memory=role.resources.get("memory"),
                gpu=role.resources.get("gpu"),
            )
            for job in workload.jobs
            for role in job.job.roles
            for _ in range(role.replicas)
        ]
        if not any(shape.gpu for shape in shapes):
            return None
        return cls(
            target=workload_distribution(shapes),
            gpu=dims.index("gpu"),
            cpu=dims.index("cpu") if "cpu" in dims else None,
            memory=dims.index("memory") if "memory" in dims else None,
        )

    def measure(self, snapshot: Snapshot) -> FragmentationSummary:
        """Fragmentation of the snapshot's nodes now (free = capacity - used)."""
        unit = snapshot.unit
        free = (snapshot.capacity - snapshot.used) / unit
        capacity = snapshot.capacity[:, self.gpu] / unit[self.gpu]
        cards = np.clip(snapshot.cards.milli_free, 0.0, None) / WHOLE  # absent slots: 0
        nodes = len(snapshot.nodes)
        return fragmentation_summary(
            self.target,
            free_cpu=free[:, self.cpu] if self.cpu is not None else np.full(nodes, np.inf),
            free_memory=free[:, self.memory] if self.memory is not None else None,
            free_cards=cards,
            capacity_gpus=float(capacity.sum()),
        )
