"""A host's NVIDIA GPUs, as NVML reports them (through ``phalanx.telemetry.nvml``)."""

from __future__ import annotations

import logging

from phalanx.domain.node import Gpu
from phalanx.telemetry.nvml import NvmlAbsent, open_nvml

log = logging.getLogger(__name__)


def nvidia_gpus() -> tuple[Gpu, ...]:
    """This host's GPUs from NVML, in NVML's order; none where nvidia-ml-py or a driver
    is absent (a CPU-only host). A card NVML cannot read is left out (logged)."""
    nvml = open_nvml()
    if isinstance(nvml, NvmlAbsent):
        log.info("%s: no GPUs on this node", nvml.reason)
        return ()
    with nvml:
        return nvml.inventory()
