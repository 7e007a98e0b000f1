"""This host as a node: its CPUs, memory and (through NVML, when present) its GPUs."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import psutil

from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources

log = logging.getLogger(__name__)


def local_node(name: str | None = None) -> Node:
    """A node named after this host with its real CPU count, memory and NVIDIA GPUs."""
    gpus = _nvidia_gpus()
    amounts = {
        "cpu": float((os.cpu_count() or 1) * 1000),
        "memory": float(psutil.virtual_memory().total),
    }
    if gpus:
        amounts["gpu"] = float(len(gpus))
        amounts["gpu-memory"] = sum(g.memory for g in gpus)
    return Node(
        name=name or _host_name(),
        capacity=Resources.of(amounts),
        labels={"kubernetes.io/hostname": name or _host_name()},
        gpus=gpus,
    )


def _host_name() -> str:
    """The host name as a DNS label (lower case, anything else as '-')."""
    raw = socket.gethostname().split(".")[0].lower()
    cleaned = "".join(c if c.isalnum() else "-" for c in raw).strip("-")
    return cleaned[:63] or "localhost"


def _nvidia_gpus() -> tuple[Gpu, ...]:
    """The host's GPUs from NVML (nvidia-ml-py), or none where it is absent."""
    try:
        import pynvml  # type: ignore[import-not-found]  # noqa: PLC0415  # optional, heavy: nvidia-ml-py
    except ImportError:
        return ()
    nvml: Any = pynvml
    try:
        nvml.nvmlInit()
    except Exception as error:  # no driver: a CPU-only host
        log.info("NVML unavailable (%s): no GPUs on this node", error)
        return ()
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            model = nvml.nvmlDeviceGetName(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(
                Gpu(
                    index=index,
                    model=model.decode() if isinstance(model, bytes) else str(model),
                    memory=float(memory),
                )
            )
        return tuple(gpus)
    finally:
        nvml.nvmlShutdown()
