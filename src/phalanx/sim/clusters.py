"""Clusters for the simulator: built-in presets and Cluster documents.

Presets (``PRESETS``), each built from the public traces where they describe it:

- ``philly``: the 11 VCs of ``philly-jobs-pollux/extra_from_HeliosArtifact/philly_vc.csv``,
  352 nodes x 8 GPUs = 2816 GPUs. Nodes ``<vc>-<i>`` carry label ``phalanx.io/vc``;
  ToR switches group 16 consecutive nodes (``tor-<k>``). The trace gives no CPU or
  memory: each node has 64 cores and 512Gi, twice what 8 one-GPU tasks of the Philly
  loader ask (4 cores, 32Gi per GPU), so GPUs are what binds, as in the trace.
- ``openb``: the 1523 nodes (6212 GPUs) of ``openb_node_list_all_node.csv`` with their
  CPU, memory, GPU count and model (label ``phalanx.io/gpu-model``).
- ``tiresias``: ``tiresias-sample/cluster_spec.csv`` (16 nodes x 4 GPUs on one switch).
- ``pollux``: the cluster of Pollux's simulator and testbed: 16 nodes x 4 T4 GPUs
  (AWS g4dn.12xlarge: 48 vCPU, 192Gi), on one switch.
- ``sia``: Sia's heterogeneous cluster (SOSP'23): 6 x 4 T4 + 2 x 8 A100 + 3 x 8
  RTX2080Ti = 64 GPUs, each node labelled with its model (``phalanx.sim.traces.sia``).
- ``kueue``: 6 nodes x 100 CPU, 1Ti memory, for Kueue's benchmark workload (see
  ``phalanx.sim.traces.kueue``); no trace files needed.

Guarantees: node names are unique; the same inputs give the same nodes in the same
order; every problem is a ``DocumentError`` naming the fix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from phalanx.domain.errors import DocumentError
from phalanx.domain.node import GPU_MODEL_LABEL, Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.sim.traces.kueue import kueue_nodes
from phalanx.sim.traces.openb import openb_nodes
from phalanx.sim.traces.philly import VC_FILE, read_vcs
from phalanx.sim.traces.sia import sia_nodes
from phalanx.sim.traces.tiresias import tiresias_nodes
from phalanx.spec.cluster import ClusterDocument
from phalanx.spec.loader import load_file

VC_LABEL: Final = "phalanx.io/vc"
GIB: Final = 2**30
PHILLY_DIR: Final = Path("philly-jobs-pollux")
OPENB_NODES: Final = Path("alibaba-gpu-v2023-openb/csv/openb_node_list_all_node.csv")
TIRESIAS_SPEC: Final = Path("tiresias-sample/cluster_spec.csv")
#: Nodes under one ToR switch in the ``philly`` preset.
PHILLY_TOR_SIZE: Final = 16


def philly_nodes(
    vc_file: Path,
    *,
    gpus_per_node: int = 8,
    cpu_per_node: float = 64,
    memory_per_node: float = 512 * GIB,
) -> tuple[Node, ...]:
    """Every VC's nodes ``<vc>-0 ..`` in VC-file order, ``cpu_per_node`` cores and
    ``memory_per_node`` bytes each, 16 consecutive nodes per ToR switch."""
    capacity = Resources.of(
        {"gpu": gpus_per_node, "cpu": cpu_per_node * 1000.0, "memory": memory_per_node}
    )
    cards = tuple(Gpu(index=i) for i in range(gpus_per_node))
    nodes: list[Node] = []
    for vc, count in read_vcs(vc_file):
        labels = MappingProxyType({VC_LABEL: vc})
        for i in range(count):
            tor = f"tor-{len(nodes) // PHILLY_TOR_SIZE}"
            nodes.append(
                Node(
                    name=f"{vc}-{i}",
                    capacity=capacity,
                    labels=labels,
                    gpus=cards,
                    network={"tor": tor},
                )
            )
    return tuple(nodes)


def pollux_nodes() -> tuple[Node, ...]:
    """16 nodes x 4 T4 GPUs, 48 cores and 192Gi each (Pollux's simulated cluster)."""
    capacity = Resources.of({"gpu": 4, "cpu": 48_000.0, "memory": 192.0 * GIB})
    cards = tuple(Gpu(index=i, model="T4") for i in range(4))
    labels = MappingProxyType({GPU_MODEL_LABEL: "T4"})
    return tuple(
        Node(
            name=f"pollux-{i}",
            capacity=capacity,
            labels=labels,
            gpus=cards,
            network={"tor": "tor-0"},
        )
        for i in range(16)
    )


def _traces(traces_dir: Path | None, name: str) -> Path:
    if traces_dir is None:
        raise DocumentError(
            f"cluster preset {name!r} is built from the public traces",
            field="traces_dir",
            fix="pass the traces folder (../shared/traces beside the repository)",
        )
    return traces_dir


_PRESETS: Final[Mapping[str, Callable[[Path | None], tuple[Node, ...]]]] = {
    "philly": lambda d: philly_nodes(_traces(d, "philly") / PHILLY_DIR / VC_FILE),
    "openb": lambda d: openb_nodes(_traces(d, "openb") / OPENB_NODES),
    "tiresias": lambda d: tiresias_nodes(_traces(d, "tiresias") / TIRESIAS_SPEC),
    "pollux": lambda _: pollux_nodes(),
    "sia": lambda _: sia_nodes(),
    "kueue": lambda _: kueue_nodes(),
}

#: Names of the built-in cluster presets.
PRESETS: Final = tuple(_PRESETS)


def cluster_preset(name: str, *, traces_dir: Path | None = None) -> tuple[Node, ...]:
    """The nodes of preset ``name``; trace-built presets read from ``traces_dir``."""
    build = _PRESETS.get(name)
    if build is None:
        raise DocumentError(
            f"{name[:60]!r} is not a cluster preset",
            field="cluster",
            fix=f"use one of {', '.join(PRESETS)}, or a path to a Cluster document",
        )
    return build(traces_dir)


def load_cluster(spec: str, *, traces_dir: Path | None = None) -> tuple[Node, ...]:
    """The nodes of a preset name or of every Cluster document in the file ``spec``."""
    if spec in _PRESETS:
        return cluster_preset(spec, traces_dir=traces_dir)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise DocumentError(
            f"{spec[:80]!r} is neither a cluster preset nor a file",
            field="cluster",
            fix=f"use one of {', '.join(PRESETS)}, or the path of a Cluster document",
        )
    clusters = [doc for doc in load_file(path) if isinstance(doc, ClusterDocument)]
    if not clusters:
        raise DocumentError(
            f"{spec[:80]}: no Cluster document", field="cluster", fix="add a kind: Cluster document"
        )
    nodes = [node for doc in clusters for node in doc.nodes()]
    counts = Counter(node.name for node in nodes)
    twice = sorted(name for name, count in counts.items() if count > 1)[:5]
    if twice:
        raise DocumentError(
            f"{spec[:80]}: node names {', '.join(twice)} appear in two Cluster documents",
            field="cluster",
            fix="give node groups of different documents different names",
        )
    return tuple(nodes)
