"""Sia's GPU types (SOSP'23, ``sia-philly/``): the names of its profiles and its cluster.

Sia's application profiles name a GPU type by a suffix (``placements-<suffix>.csv``,
``scalability-<suffix>.csv``); phalanx names it by the GPU model a node carries in its
``phalanx.io/gpu-model`` label. ``PROFILE_SUFFIXES`` is the one mapping between the two,
from ``sia-simulator/simulator_config.py``'s comments:

- ``aws``: AWS g4dn.12xlarge, ``T4``, 4 GPUs a node;
- ``azure``: Azure ND40rs_v2, ``V100``, 8;
- ``dgx-ext``: DGX-A100 (8x A100 40GB) at Sia's extended batch sizes, ``A100``, 8;
- ``quad``: 4x Quadro RTX 6000 on-prem, ``RTX6000``, 4;
- ``rtx``: 8x RTX 2080Ti on-prem, ``RTX2080Ti``, 8.

``dgx`` (the same DGX-A100 profiled at fewer batch sizes; Sia's config calls
``dgx-ext`` "should be default") is not mapped: a suffix outside this table is read
as a model name itself, so ``dgx``'s curves apply to nodes labelled ``dgx`` only.

``sia_nodes``: Sia's default heterogeneous cluster (``cluster_nnodes = {"aws": 6,
"dgx-ext": 2, "rtx": 3}``): 6 x 4 T4 + 2 x 8 A100 + 3 x 8 RTX2080Ti = 64 GPUs. Sia's
simulator models GPUs only; CPU and memory are the machines' where they are named
(g4dn.12xlarge: 48 vCPU, 192Gi; DGX A100: 128 cores, 1Ti) and generous for the
RTX 2080Ti server Sia does not describe (64 cores, 384Gi); Sia's jobs ask for none.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from phalanx.domain.node import GPU_MODEL_LABEL, Gpu, Node
from phalanx.domain.resources import Resources

GIB: Final = 2**30

#: Sia's profile suffix -> the GPU model (``phalanx.io/gpu-model``) it was measured on.
PROFILE_SUFFIXES: Final[Mapping[str, str]] = MappingProxyType(
    {"aws": "T4", "azure": "V100", "dgx-ext": "A100", "quad": "RTX6000", "rtx": "RTX2080Ti"}
)


def suffix_model(suffix: str) -> str:
    """The GPU model a profile suffix names: Sia's (``PROFILE_SUFFIXES``), else the
    suffix itself."""
    return PROFILE_SUFFIXES.get(suffix, suffix)


#: How many times slower than its profiled curves each application trains in Sia's
#: simulator ("slowdown values for each job fitted to real-world data",
#: ``simulator_config.SLOWDOWNS``; its goodput is multiplied by the inverse).
SLOWDOWNS: Final[Mapping[str, float]] = MappingProxyType(
    {
        "cifar10": 1.8,
        "imagenet": 1.2,
        "yolov3": 1.2,
        "bert": 1.2,
        "deepspeech2": 1.2,
        "ncf": 1.5,
    }
)
#: Seconds a start or restart of each application costs in Sia's simulator
#: (``applications.Application.rescale_time``; another application: 30).
RESTART_SECONDS: Final[Mapping[str, float]] = MappingProxyType(
    {
        "cifar10": 50.0,
        "deepspeech2": 25.0,
        "bert": 120.0,
        "yolov3": 80.0,
        "imagenet": 250.0,
        "ncf": 15.0,
    }
)

#: (name prefix, nodes, GPU model, GPUs per node, cores, memory bytes, GPU memory bytes)
SIA_GROUPS: Final = (
    ("t4", 6, "T4", 4, 48, 192 * GIB, 16 * GIB),
    ("a100", 2, "A100", 8, 128, 1024 * GIB, 40 * GIB),
    ("rtx", 3, "RTX2080Ti", 8, 64, 384 * GIB, 11 * GIB),
)


def sia_nodes() -> tuple[Node, ...]:
    """Sia's 64-GPU heterogeneous cluster: nodes ``t4-0..5``, ``a100-0..1``,
    ``rtx-0..2``, each labelled with its GPU model, all on one switch."""
    nodes: list[Node] = []
    for prefix, count, model, gpus, cores, memory, gpu_memory in SIA_GROUPS:
        capacity = Resources.of({"gpu": gpus, "cpu": cores * 1000.0, "memory": float(memory)})
        cards = tuple(Gpu(index=i, model=model, memory=float(gpu_memory)) for i in range(gpus))
        labels = MappingProxyType({GPU_MODEL_LABEL: model})
        nodes.extend(
            Node(
                name=f"{prefix}-{i}",
                capacity=capacity,
                labels=labels,
                gpus=cards,
                network={"tor": "tor-0"},
            )
            for i in range(count)
        )
    return tuple(nodes)
