"""Nodes: capacity, labels, taints, GPUs and their place in the network."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from phalanx.domain.cells import NodeCells
from phalanx.domain.errors import InvalidInput
from phalanx.domain.resources import GPU, Resources
from phalanx.domain.topology import GpuTopology

#: The label naming a node's GPU model; a task asks for GPU models through it
#: (a node selector, or a node affinity term ``In`` the models it accepts).
GPU_MODEL_LABEL: Final = "phalanx.io/gpu-model"


class TaintEffect(StrEnum):
    """What a taint does to tasks that do not tolerate it."""

    NO_SCHEDULE = "NoSchedule"  # never placed here
    PREFER_NO_SCHEDULE = "PreferNoSchedule"  # placed here only when nothing else fits
    NO_EXECUTE = "NoExecute"  # never placed here (eviction of running tasks is the driver's)


@dataclass(frozen=True, slots=True, kw_only=True)
class Taint:
    """A mark on a node that repels tasks without a matching toleration."""

    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


@dataclass(frozen=True, slots=True, kw_only=True)
class Toleration:
    """Allows a task onto nodes with a matching taint (Kubernetes semantics)."""

    key: str = ""  # empty key with operator Exists tolerates everything
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: TaintEffect | None = None  # None tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration matches ``taint``."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return self.key in ("", taint.key)
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """One GPU card of a node. Peers and NIC come from the node's ``gpu_topology`` when known."""

    index: int
    model: str = ""
    memory: float = 0.0  # bytes
    numa: int = 0
    nvlink_peers: tuple[int, ...] = ()  # indexes of GPUs reached over NVLink
    nic: str | None = None  # name of the NIC with the best link to this GPU


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A machine. ``capacity`` is what tasks may use (Kubernetes' allocatable)."""

    name: str
    capacity: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    gpu_topology: GpuTopology | None = None  # links between the GPUs and NICs, when known
    network: Mapping[str, str] = field(default_factory=dict)  # tier -> switch, e.g. tor -> tor-3
    max_tasks: int | None = None
    schedulable: bool = True  # False once cordoned
    cells: NodeCells | None = None  # its place in the cell hierarchy (the hived plugin's)

    def __post_init__(self) -> None:
        if self.gpu_topology is not None and self.gpu_topology.count != len(self.gpus):
            raise InvalidInput(
                f"node {self.name}: the GPU topology describes {self.gpu_topology.count} GPUs "
                f"but the node has {len(self.gpus)}",
                field="gpu_topology",
                fix="give one Gpu per GPU of the topology",
            )
        count = len(self.gpus) or int(self.capacity.get(GPU))
        if self.cells is not None and len(self.cells.levels[-1].cells[0]) != count:
            raise InvalidInput(
                f"node {self.name}: its cells hold {len(self.cells.levels[-1].cells[0])} GPUs "
                f"but the node has {count}",
                field="cells",
                fix="give the node's cells exactly its GPUs",
            )
