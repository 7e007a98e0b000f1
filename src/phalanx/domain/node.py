"""Nodes: capacity, labels, taints, GPUs, their place in the network and their address."""

from __future__ import annotations

import ipaddress
import re
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

#: The label of a node that can run a role's container ``image``, valued with its
#: container runtime (``podman``, ``docker``). The local executor sets it on its own node
#: when the host has a runtime; a Cluster document's nodes declare it themselves. The
#: predicates plugin keeps a role with an image off every node without it.
CONTAINER_RUNTIME_LABEL: Final = "phalanx.io/container-runtime"

#: The label of a node of spot-like capacity (``"true"``), which may be taken back at
#: short notice: the reclaimable plugin sends elastic replicas there first.
RECLAIMABLE_LABEL: Final = "phalanx.io/reclaimable"

#: The label every node carries with its own name (Kubernetes' ``kubernetes.io/hostname``):
#: a node selector or affinity term on it keeps a task on, or off, named nodes. The
#: engine reads it from ``Node.name`` unless the node's labels set it.
NODE_NAME_LABEL: Final = "phalanx.io/node"

#: One label of a DNS host name (RFC 1123): letters, digits and inner hyphens.
_HOST_LABEL: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def check_address(address: str, *, field: str = "address", owner: str = "") -> None:
    """Accept an IPv4 or IPv6 address or a DNS host name (at most 253 characters; labels
    of letters, digits and inner hyphens, the last not all digits). Else raise
    ``InvalidInput`` naming ``field``, its message headed by ``owner`` (``node gpu-3``)."""
    try:
        ipaddress.ip_address(address)
        return
    except ValueError:
        pass
    name = address.removesuffix(".")
    labels = name.split(".")
    # An all-digit last label is never a host name (RFC 3696): 10.0.0.256 is a bad address.
    valid = 0 < len(name) <= 253 and all(map(_HOST_LABEL.fullmatch, labels))
    if valid and not labels[-1].isdigit():
        return
    raise InvalidInput(
        f"{owner + ': ' if owner else ''}{address[:80]!r} is neither an IP address nor a host name",
        field=field,
        fix="give the address the node's peers reach it at, such as 10.0.0.7 or gpu-7.lab",
    )


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
    """A machine. ``capacity`` is what tasks may use (Kubernetes' allocatable).

    ``address`` is where the node's tasks are reached by their peers (an IP address or a
    host name): the rendezvous of a job (``MASTER_ADDR``, the host lists) is built from
    it, as the executor resolves it. None: the executor knows the node's address (the
    local executor runs every task on its own host, so its tasks' address is the host's).
    """

    name: str
    capacity: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    gpu_topology: GpuTopology | None = None  # links between the GPUs and NICs, when known
    network: Mapping[str, str] = field(default_factory=dict)  # tier -> switch, e.g. tor -> tor-3
    address: str | None = None
    max_tasks: int | None = None
    schedulable: bool = True  # False once cordoned
    #: Cards out of scheduling by themselves (``Gpu.index``, NVML's; a node without a
    #: list of GPUs numbers its ``gpu`` capacity 0..n-1): a card with hardware errors, as
    #: Kubernetes' device plugin marks one device Unhealthy. The engine gives no new task
    #: such a card and takes its GPUs (and their ``gpu-memory``) out of the node's
    #: capacity; a task already holding one keeps it, still counted as using it (so the
    #: node's free GPUs drop by that card as well, as Kubernetes' allocatable does), and
    #: the card takes work again once it is no longer named here. ``schedulable`` False
    #: takes the whole node out instead.
    cordoned_gpus: frozenset[int] = frozenset()
    cells: NodeCells | None = None  # its place in the cell hierarchy (the hived plugin's)
    # the datasets its cache holds whole: listing digests (sha256:...), as jobs pin them
    datasets: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.address is not None:
            check_address(self.address, owner=f"node {self.name}")
        if self.gpu_topology is not None and self.gpu_topology.count != len(self.gpus):
            raise InvalidInput(
                f"node {self.name}: the GPU topology describes {self.gpu_topology.count} GPUs "
                f"but the node has {len(self.gpus)}",
                field="gpu_topology",
                fix="give one Gpu per GPU of the topology",
            )
        count = len(self.gpus) or int(self.capacity.get(GPU))
        if self.cordoned_gpus:
            self._check_cordoned(count)
        if self.cells is not None and len(self.cells.levels[-1].cells[0]) != count:
            raise InvalidInput(
                f"node {self.name}: its cells hold {len(self.cells.levels[-1].cells[0])} GPUs "
                f"but the node has {count}",
                field="cells",
                fix="give the node's cells exactly its GPUs",
            )

    def _check_cordoned(self, count: int) -> None:
        """Every cordoned card is one of the node's ``count`` cards; ``InvalidInput`` else."""
        cards = {gpu.index for gpu in self.gpus} if self.gpus else set(range(count))
        strange = sorted(
            (g for g in self.cordoned_gpus if type(g) is not int or g not in cards), key=str
        )
        if strange:
            listed = ", ".join(map(str, sorted(cards))) or "none"
            raise InvalidInput(
                f"node {self.name}: cordoned GPU(s) {', '.join(map(repr, strange))} are not "
                f"cards of the node (its cards: {listed})",
                field="cordoned_gpus",
                fix="name cards by their index (nvidia-smi's), each one the node has",
            )
