"""What a node's GPUs report, and what each task does with the cards it was given.

Values only: ``nvml`` reads them from a node's driver, ``sampler`` attributes them to
tasks, ``health`` judges a card by them, and the control plane keeps, exports and acts
on them. Units are the DCGM exporter's where it has one (percent, degrees Celsius,
watts) and bytes for memory (the exporter's MiB are computed when exported).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessUse:
    """One process on one card, as NVML lists the card's compute processes."""

    pid: int  # in the node's pid namespace
    memory: int | None  # bytes of the card's memory it holds; None where NVML does not say
    #: percent of the card's SMs it kept busy over the last interval, where NVML says
    utilisation: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CardReading:
    """One card of one node at one instant. A counter NVML does not support on this
    card reads 0 (False for flags); ``error`` is set (and the figures are 0) when NVML
    could not read the card at all (it fell off the bus, it is lost)."""

    index: int  # NVML's index on its node (``Gpu.index``, what ``CUDA_VISIBLE_DEVICES`` names)
    uuid: str = ""
    model: str = ""
    pci_bus_id: str = ""
    utilisation: float = 0.0  # percent of time a kernel ran (DCGM_FI_DEV_GPU_UTIL)
    memory_used: int = 0  # bytes (DCGM_FI_DEV_FB_USED)
    memory_total: int = 0  # bytes
    temperature: float = 0.0  # degrees Celsius (DCGM_FI_DEV_GPU_TEMP)
    power: float = 0.0  # watts (DCGM_FI_DEV_POWER_USAGE)
    #: the last XID error seen on the card since its node began sampling, 0 for none
    #: (DCGM_FI_DEV_XID_ERRORS)
    xid: int = 0
    xids: tuple[int, ...] = ()  # XID errors seen since the previous reading, oldest first
    #: rows remapped for correctable errors (DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS)
    remapped_correctable: int = 0
    #: rows remapped for uncorrectable errors (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)
    remapped_uncorrectable: int = 0
    remap_pending: bool = False  # a remap waits for a reset of the card
    remap_failure: bool = False  # a remap failed (DCGM_FI_DEV_ROW_REMAP_FAILURE)
    pcie_replays: int = 0  # PCIe replays since the driver loaded (DCGM_FI_DEV_PCIE_REPLAY_COUNTER)
    processes: tuple[ProcessUse, ...] = ()
    error: str | None = None

    @property
    def memory_free(self) -> int:
        """Bytes of the card's memory no process holds (DCGM_FI_DEV_FB_FREE)."""
        return max(self.memory_total - self.memory_used, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCards:
    """A live task as the sampler needs it: the cards it was given and its processes."""

    job: str
    task: str
    gpus: tuple[int, ...]
    pids: frozenset[int] = frozenset()  # its processes (the whole tree) on this node


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskGpuUse:
    """What one task did with its cards at one reading.

    ``utilisation`` is the mean over its cards (percent), each card's own figure for a
    card it holds alone, and its processes' share where it shares the card and NVML
    reports per-process figures (else the card's). ``memory`` is bytes: a card it holds
    alone counts whole; on a shared card, its processes' memory where NVML lists them
    (else the card's used memory split evenly among the tasks given it)."""

    job: str
    task: str
    gpus: tuple[int, ...]
    utilisation: float
    memory: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSample:
    """One reading of every card of one node, with its tasks' use of them.

    ``absent`` says why a node has no readings (no NVML library, no driver, no card);
    such a sample has no cards and no tasks. ``driver`` is the driver's version."""

    node: str
    at: float  # seconds since the epoch (the node's clock)
    cards: tuple[CardReading, ...] = ()
    tasks: tuple[TaskGpuUse, ...] = ()
    driver: str = ""
    absent: str | None = None
