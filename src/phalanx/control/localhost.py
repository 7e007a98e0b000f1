"""This host as a node: its CPUs, memory and (through NVML, when present) its GPUs."""

from __future__ import annotations

import os
import socket

import psutil

from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.executors.containers import node_labels
from phalanx.executors.gpus import nvidia_gpus


def local_node(name: str | None = None) -> Node:
    """A node named after this host with its real CPU count, memory and NVIDIA GPUs,
    labelled ``phalanx.io/container-runtime`` when it has one (``containers.node_labels``,
    the runtime the local executor uses): only then can a role with an image go there."""
    gpus = nvidia_gpus()
    amounts = {
        "cpu": float((os.cpu_count() or 1) * 1000),
        "memory": float(psutil.virtual_memory().total),
    }
    if gpus:
        amounts["gpu"] = float(len(gpus))
        amounts["gpu-memory"] = sum(g.memory for g in gpus)
    labels = {"kubernetes.io/hostname": name or _host_name(), **node_labels()}
    return Node(
        name=name or _host_name(),
        capacity=Resources.of(amounts),
        labels=labels,
        gpus=gpus,
    )


def _host_name() -> str:
    """The host name as a DNS label (lower case, anything else as '-')."""
    raw = socket.gethostname().split(".")[0].lower()
    cleaned = "".join(c if c.isalnum() else "-" for c in raw).strip("-")
    return cleaned[:63] or "localhost"
