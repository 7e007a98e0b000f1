"""A host's NVIDIA GPUs, as NVML (nvidia-ml-py) reports them."""

from __future__ import annotations

import logging
from typing import Any

from phalanx.domain.node import Gpu

log = logging.getLogger(__name__)


def nvidia_gpus() -> tuple[Gpu, ...]:
    """This host's GPUs from NVML, in NVML's order; none where nvidia-ml-py or a driver
    is absent (a CPU-only host)."""
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
