"""Ray's nodes as phalanx nodes: every alive Ray node is one ``Node``.

For each alive node of the Ray cluster the driver is connected to:

- its name is ``ray-`` and its address with dots and colons as dashes
  (``ray-10-0-0-7``): the same for as long as the machine keeps its address, where a Ray
  node id changes with every start of its raylet;
- its capacity is what Ray offers: CPUs (in millicores), memory and the GPU count, and
  ``gpu-memory`` where the GPUs' memory is known;
- its labels are Ray's (``ray.io/node-id`` among them) and the probe's (the node's
  container runtime, ``containers.node_labels``); its address is Ray's
  ``NodeManagerAddress``, where its tasks' peers reach them;
- its GPUs come from a probe that runs *on that node*, in its agent (pinned there, and
  already running when a server restarts, so a restart probes in one round trip):
  NVML there, where nvidia-ml-py and a driver are (``executors.gpus``). A node whose probe finds none takes the GPUs of
  the declared node of the same name (a Cluster document's), when that declares as
  many; else its cards are known by count alone. phalanx must be importable on every
  node (it is installed beside Ray), since the probe is its code.

``probe`` runs on the node; ``ray_node`` and ``probed_node`` are the mapping alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import GPU_MODEL_LABEL, Gpu, Node
from phalanx.domain.resources import CPU, GPU, GPU_MEMORY, MEMORY, Resources
from phalanx.executors.containers import node_labels
from phalanx.executors.gpus import nvidia_gpus

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """What the probe saw on a node: the address Ray gave the worker it ran in (the
    proof that it ran where it was sent) and the node's GPUs through NVML."""

    address: str
    gpus: tuple[Gpu, ...]
    labels: dict[str, str]


def node_name(address: str) -> str:
    """``ray-`` and ``address`` with ``.`` and ``:`` as ``-`` (a DNS label for IPv4)."""
    return "ray-" + address.replace(".", "-").replace(":", "-").strip("-")


def ray_node(
    info: Mapping[str, Any],
    probed: Sequence[Gpu],
    declared: Node | None,
    probed_labels: Mapping[str, str] | None = None,
) -> Node:
    """The phalanx node for one entry of ``ray.nodes()`` (see the module docstring);
    ``probed_labels`` are what the probe found on the node (its container runtime)."""
    offered: Mapping[str, float] = info.get("Resources", {})
    address = str(info["NodeManagerAddress"])
    count = int(offered.get("GPU", 0))
    gpus = _cards(count, probed, declared)
    amounts = {CPU: float(offered.get("CPU", 0)) * 1000, MEMORY: float(offered.get("memory", 0))}
    if count:
        amounts[GPU] = float(count)
        if all(card.memory for card in gpus):
            amounts[GPU_MEMORY] = sum(card.memory for card in gpus)
    labels = {str(k): str(v) for k, v in (info.get("Labels") or {}).items()}
    labels.update(probed_labels or {})
    models = {card.model for card in gpus if card.model}
    if len(models) == 1:
        labels[GPU_MODEL_LABEL] = models.pop()
    return Node(
        name=node_name(address),
        capacity=Resources.of(amounts),
        labels=labels,
        gpus=gpus,
        address=address,
    )


def _cards(count: int, probed: Sequence[Gpu], declared: Node | None) -> tuple[Gpu, ...]:
    """``count`` cards: the probed ones when the probe saw as many, else the declared
    node's when it declares as many, else cards by index alone."""
    if len(probed) == count:
        return tuple(probed)
    if declared is not None and len(declared.gpus) == count:
        return declared.gpus
    return tuple(Gpu(index=index) for index in range(count))


def probe() -> Probe:
    """Run on a node (by its agent): its address as Ray knows it, its GPUs and its
    container runtime's labels."""
    import ray  # noqa: PLC0415  # the optional extra: only a Ray worker runs this

    address = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return Probe(address=address, gpus=nvidia_gpus(), labels=node_labels())


def probed_node(info: Mapping[str, Any], seen: Probe, declared: Node | None) -> Node:
    """The phalanx node for ``info`` (an entry of ``ray.nodes()``) as ``seen`` by a probe
    run on it (by its agent). Raises ``InvalidInput`` when the probe ran at another
    address than Ray's for the node (then the cluster's addresses are not what its
    nodes report: set each node's ``--node-ip-address``)."""
    address = str(info["NodeManagerAddress"])
    if seen.address != address:
        raise InvalidInput(
            f"the probe sent to Ray node {address} ran at {seen.address}",
            field="--ray-address",
            fix="start every Ray node with --node-ip-address set to its own address",
        )
    return ray_node(info, seen.gpus, declared, seen.labels)
