"""The one adapter to NVIDIA's driver: NVML through nvidia-ml-py (``pynvml``).

``open_nvml()`` opens NVML on this node and gives an ``Nvml`` (its cards' handles,
looked up once) or, on a node without NVML (no nvidia-ml-py, no driver, no card), an
``NvmlAbsent`` saying why in one sentence: it never raises for a CPU-only node.
``Nvml.inventory()`` lists the cards as ``domain.node.Gpu``; ``Nvml.read()`` reads every
card once (``readings.CardReading``) and never raises either: a figure a card does not
give reads 0 (said once per card and figure in the debug log), a card NVML cannot read
at all reads with ``error`` set.

The module is a parameter (``open_nvml(module)``): nvidia-ml-py's by default, imported
only when NVML is first opened (``pynvml``, a ctypes module that loads libnvidia-ml at
``nvmlInit``); tests and demos pass ``recorded.RecordedNvml``, a pynvml-like module
over a recording of real cards, so the code here runs as it will on a GPU node. pynvml
has no type information: what it gives is ``Any`` here, and goes no further.
"""

from __future__ import annotations

import ctypes
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from phalanx.domain.node import Gpu
from phalanx.telemetry.readings import CardReading, ProcessUse

log = logging.getLogger(__name__)

#: NVML's "not available" for a 64-bit figure (a process's memory under WDDM or MIG).
_NOT_AVAILABLE: Final = 2**64 - 1
#: The most XID events one reading takes off the event set: a card that floods it cannot
#: hold its node's sampling in a loop.
_MOST_EVENTS: Final = 1024
#: NVML's errors that say the card itself is gone, whatever was asked of it.
_GONE: Final = ("NVMLError_GpuIsLost", "NVMLError_ResetRequired")

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmlAbsent:
    """This node has no NVML to read: ``reason`` says why, in one sentence
    ("NVML is not available on this node: NVML Shared Library Not Found")."""

    reason: str


class _Card:
    """One card as opened: its handle and what does not change while the driver runs."""

    __slots__ = (
        "broken",
        "handle",
        "index",
        "last_seen",
        "memory_total",
        "model",
        "pci_bus_id",
        "uuid",
        "xid",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.handle: Any = None
        self.broken: str | None = None  # why it could not be opened
        self.uuid = ""
        self.model = ""
        self.pci_bus_id = ""
        self.memory_total = 0
        self.last_seen = 0  # NVML's timestamp of the last per-process sample read
        self.xid = 0  # the last XID seen


class Nvml:
    """NVML opened on one node: its cards, read on demand. Built by ``open_nvml``.

    Guarantees: handles and each card's identity (UUID, name, PCI bus id) are read once,
    at open; ``read`` never raises; ``close`` shuts NVML down and may be called twice.
    Not thread-safe: one sampler reads it."""

    def __init__(self, module: Any, cards: list[_Card], driver: str) -> None:
        self._nvml = module
        self._cards = cards
        self.driver = driver  # the driver's version, "" when NVML does not say
        self._error: type[BaseException] = module.NVMLError
        self._gone: tuple[type[BaseException], ...] = tuple(
            getattr(module, name) for name in _GONE if hasattr(module, name)
        )
        self._said: set[tuple[int, str]] = set()  # (card, figure) already logged as unread
        self._by_handle: dict[object, int] = {}
        self._events: Any = None
        self._closed = False
        self._watch_xids()

    def inventory(self) -> tuple[Gpu, ...]:
        """The cards as the scheduler knows them (index, model, memory in bytes), in
        NVML's order. A card NVML could not open is left out (the log says why)."""
        return tuple(
            Gpu(index=c.index, model=c.model, memory=float(c.memory_total))
            for c in self._cards
            if c.broken is None
        )

    def read(self) -> tuple[CardReading, ...]:
        """Every card once, in NVML's order, with the XIDs each raised since the last
        read. Never raises (see the module's docstring)."""
        xids = self._drain()
        return tuple(self._read(card, tuple(xids.get(card.index, ()))) for card in self._cards)

    def close(self) -> None:
        """Free the event set and shut NVML down; again is a no-op."""
        if self._closed:
            return
        self._closed = True
        if self._events is not None:
            self._quietly(self._nvml.nvmlEventSetFree, self._events)
        self._quietly(self._nvml.nvmlShutdown)

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- XIDs --------------------------------------------------------------------------

    def _watch_xids(self) -> None:
        """One event set for every card's critical XIDs (a card that cannot say them is
        logged and read without)."""
        nvml = self._nvml
        try:
            self._events = nvml.nvmlEventSetCreate()
        except self._error as error:
            log.info("NVML cannot watch XIDs on this node (%s): cards read without them", error)
            return
        for card in self._cards:
            if card.handle is None:
                continue
            self._by_handle[_handle_key(card.handle)] = card.index
            try:
                nvml.nvmlDeviceRegisterEvents(
                    card.handle, nvml.nvmlEventTypeXidCriticalError, self._events
                )
            except self._error as error:
                log.info("GPU %d: NVML cannot watch its XIDs (%s)", card.index, error)

    def _drain(self) -> dict[int, list[int]]:
        """The XIDs waiting on the event set, by card, oldest first; never blocks."""
        found: dict[int, list[int]] = defaultdict(list)
        if self._events is None:
            return found
        nvml = self._nvml
        for _ in range(_MOST_EVENTS):
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError_Timeout:
                break  # none left
            except self._error as error:
                self._once(-1, "XIDs", error)
                break
            index = self._index_of(event.device)
            if index is not None:
                found[index].append(int(event.eventData))
        for card in self._cards:
            if found.get(card.index):
                card.xid = found[card.index][-1]
        return found

    def _index_of(self, device: Any) -> int | None:
        index = self._by_handle.get(_handle_key(device))
        if index is not None:
            return index
        try:
            return int(self._nvml.nvmlDeviceGetIndex(device))
        except self._error as error:
            log.debug("an XID event of a card NVML cannot name (%s): dropped", error)
            return None

    # -- one card ----------------------------------------------------------------------

    def _read(self, card: _Card, xids: tuple[int, ...]) -> CardReading:
        base = CardReading(
            index=card.index,
            uuid=card.uuid,
            model=card.model,
            pci_bus_id=card.pci_bus_id,
            xid=card.xid,
            xids=xids,
            error=card.broken,
        )
        if card.handle is None:
            return base
        try:
            return self._figures(card, base)
        except self._error as error:  # it is gone, or its memory (every card's) unread
            return replace(base, error=_unreadable(error))

    def _figures(self, card: _Card, base: CardReading) -> CardReading:
        nvml, field = self._nvml, self._field
        memory = nvml.nvmlDeviceGetMemoryInfo(card.handle)
        rows = field(card, "remapped rows", nvml.nvmlDeviceGetRemappedRows, (0, 0, 0, 0))
        busy = field(card, "utilisation", lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu, 0)
        temperature = field(
            card,
            "temperature",
            lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            0,
        )
        return replace(
            base,
            utilisation=float(busy),
            memory_used=int(memory.used),
            memory_total=int(memory.total),
            temperature=float(temperature),
            power=field(card, "power", nvml.nvmlDeviceGetPowerUsage, 0) / 1000.0,  # mW
            remapped_correctable=int(rows[0]),
            remapped_uncorrectable=int(rows[1]),
            remap_pending=bool(rows[2]),
            remap_failure=bool(rows[3]),
            pcie_replays=int(field(card, "PCIe replays", nvml.nvmlDeviceGetPcieReplayCounter, 0)),
            processes=self._processes(card),
        )

    def _processes(self, card: _Card) -> tuple[ProcessUse, ...]:
        """The card's compute processes, with each one's share of the SMs where NVML has
        sampled it since the last read."""
        listed: list[Any] = self._field(
            card, "processes", self._nvml.nvmlDeviceGetComputeRunningProcesses, []
        )
        if not listed:
            return ()
        memory: dict[int, int | None] = {}
        for process in listed:
            used = process.usedGpuMemory
            known = None if used is None or used >= _NOT_AVAILABLE else int(used)
            pid = int(process.pid)
            if pid in memory:  # one process on several instances of a MIG card
                before = memory[pid]
                known = None if before is None or known is None else before + known
            memory[pid] = known
        busy = self._sm_shares(card)
        return tuple(
            ProcessUse(pid=pid, memory=used, utilisation=busy.get(pid))
            for pid, used in memory.items()
        )

    def _sm_shares(self, card: _Card) -> dict[int, float]:
        """Each process's mean SM utilisation over NVML's samples since the last read;
        none when NVML has no new sample (``NotFound``: not an error)."""
        nvml = self._nvml
        try:
            samples: list[Any] = self._field(
                card,
                "per-process utilisation",
                lambda h: nvml.nvmlDeviceGetProcessUtilization(h, card.last_seen),
                [],
                quiet=(nvml.NVMLError_NotFound,),
            )
        except nvml.NVMLError_NotFound:
            return {}
        sums: dict[int, list[float]] = {}
        for sample in samples:
            sums.setdefault(int(sample.pid), []).append(float(sample.smUtil))
            card.last_seen = max(card.last_seen, int(sample.timeStamp))
        return {pid: sum(values) / len(values) for pid, values in sums.items()}

    def _field(
        self,
        card: _Card,
        name: str,
        read: Callable[[Any], T],
        default: T,
        *,
        quiet: tuple[type[BaseException], ...] = (),
    ) -> T:
        """One figure of one card: ``default`` where NVML cannot give it (said once per
        card and figure). An error that means the card is gone, or one of ``quiet``,
        reaches the caller as it came: the first ends the whole reading."""
        try:
            return read(card.handle)
        except (*self._gone, *quiet):
            raise
        except self._error as error:
            self._once(card.index, name, error)
            return default

    def _once(self, index: int, name: str, error: BaseException) -> None:
        if (index, name) in self._said:
            return
        self._said.add((index, name))
        where = f"GPU {index}" if index >= 0 else "this node"
        log.debug("%s: NVML does not give its %s (%s); it reads 0", where, name, error)

    def _quietly(self, call: Callable[..., object], *args: object) -> None:
        try:
            call(*args)
        except self._error as error:
            log.debug("NVML: %s failed while closing (%s)", getattr(call, "__name__", call), error)


def open_nvml(module: Any = None) -> Nvml | NvmlAbsent:
    """NVML opened on this node, or why it cannot be: nvidia-ml-py missing, NVML failing
    to start (no driver, no library), or no card. Never raises for a CPU-only node.
    ``module``: a pynvml-like module (``recorded.RecordedNvml`` in tests); None:
    nvidia-ml-py's, imported now."""
    if module is None:
        try:
            import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415  # on a GPU node only
        except ImportError as error:
            return NvmlAbsent(reason=f"NVML is not available on this node: {error}")
        module = pynvml
    try:
        module.nvmlInit()
    except module.NVMLError as error:
        return NvmlAbsent(reason=f"NVML is not available on this node: {error}")
    try:
        count = int(module.nvmlDeviceGetCount())
    except module.NVMLError as error:
        _shutdown(module)
        return NvmlAbsent(reason=f"NVML cannot count this node's GPUs: {error}")
    if count == 0:
        _shutdown(module)
        return NvmlAbsent(reason="NVML finds no GPU on this node")
    try:
        driver = _text(module.nvmlSystemGetDriverVersion())
    except module.NVMLError as error:
        log.debug("NVML does not give the driver's version (%s)", error)
        driver = ""
    return Nvml(module, [_open_card(module, index) for index in range(count)], driver)


def _open_card(module: Any, index: int) -> _Card:
    """A card's handle and identity; a card whose handle or memory NVML cannot give is
    broken (it reads with that error every time)."""
    card = _Card(index)
    try:
        handle = module.nvmlDeviceGetHandleByIndex(index)
        card.memory_total = int(module.nvmlDeviceGetMemoryInfo(handle).total)
    except module.NVMLError as error:
        card.broken = _unreadable(error)
        log.warning("GPU %d: %s", index, card.broken)
        return card
    card.handle = handle
    for name, attribute, read in (
        ("UUID", "uuid", module.nvmlDeviceGetUUID),
        ("name", "model", module.nvmlDeviceGetName),
        ("PCI bus id", "pci_bus_id", lambda h: module.nvmlDeviceGetPciInfo(h).busId),
    ):
        try:
            setattr(card, attribute, _text(read(handle)))
        except module.NVMLError as error:
            log.debug("GPU %d: NVML does not give its %s (%s)", index, name, error)
    return card


def _shutdown(module: Any) -> None:
    try:
        module.nvmlShutdown()
    except module.NVMLError as error:
        log.debug("NVML did not shut down cleanly (%s)", error)


def _unreadable(error: BaseException) -> str:
    return f"NVML cannot read the card: {error}"


def _text(value: object) -> str:
    """A string NVML gave, as ``str`` (older nvidia-ml-py gives ``bytes``)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _handle_key(handle: object) -> object:
    """What identifies a card's handle: the address a ctypes handle points at (NVML
    gives an event's device as a new pointer object), else the handle itself."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value  # type: ignore[arg-type]
    except (ctypes.ArgumentError, TypeError):
        return handle
