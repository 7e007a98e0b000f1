"""A recorded NVML: a pynvml-like module over a recording of real cards.

``RecordedNvml.load("h100-sxm-8")`` gives an object with exactly the functions,
constants and exception classes of nvidia-ml-py that ``nvml`` calls, answering from a
recording (``recordings/*.json``: what ``nvidia-smi -q`` printed on a real node, its
source named in the file). Pass it to ``nvml.open_nvml`` (or ``GpuSampler(nvml=...)``)
and the real adapter runs on it, on a host without a GPU.

Errors are nvidia-ml-py's own classes (``pynvml.NVMLError_NotSupported`` ...), so the
adapter's error handling runs as it will against a driver. A test or a demo changes the
cards as it goes: ``set`` a figure, ``add_process``/``end_process``, ``raise_xid``
(queued on every event set the card is registered on), ``lose`` a card (every call on it
raises ``NVMLError_GpuIsLost``), ``refuse`` a figure (``NVMLError_NotSupported`` or
another error). ``calls`` counts the NVML calls made. ``RecordedNvml.absent()`` is a
node whose NVML does not start.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from dataclasses import dataclass, field
from importlib import resources
from types import SimpleNamespace
from typing import Any, Final

import pynvml  # type: ignore[import-untyped]  # the real error classes and constants

from phalanx.domain.errors import InvalidInput

MIB: Final = 1 << 20

#: What ``refuse`` names, and the NVML calls each name stands for.
FIELDS: Final = {
    "memory": ("nvmlDeviceGetMemoryInfo",),
    "utilisation": ("nvmlDeviceGetUtilizationRates",),
    "temperature": ("nvmlDeviceGetTemperature",),
    "power": ("nvmlDeviceGetPowerUsage",),
    "remapped_rows": ("nvmlDeviceGetRemappedRows",),
    "pcie_replays": ("nvmlDeviceGetPcieReplayCounter",),
    "processes": ("nvmlDeviceGetComputeRunningProcesses",),
    "process_utilisation": ("nvmlDeviceGetProcessUtilization",),
    "xids": ("nvmlDeviceRegisterEvents",),
    "identity": ("nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo"),
}


@dataclass(slots=True, kw_only=True)
class RecordedProcess:
    """One compute process on a recorded card (mutable: a test changes it)."""

    pid: int
    memory: int | None = None  # bytes; None: NVML does not say (NVML_VALUE_NOT_AVAILABLE)
    utilisation: float | None = None  # percent of the SMs; None: NVML has no sample of it


@dataclass(slots=True, kw_only=True)
class RecordedCard:
    """One recorded card's state (mutable: a test or a demo changes it as it goes)."""

    name: str
    uuid: str
    pci_bus_id: str
    memory_total: int  # bytes
    memory_used: int = 0  # bytes
    utilisation: int = 0  # percent
    temperature: int = 0  # degrees Celsius
    power: float = 0.0  # watts
    pcie_replays: int = 0
    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    processes: dict[int, RecordedProcess] = field(default_factory=dict)
    lost: bool = False
    refused: dict[str, type[Exception]] = field(default_factory=dict)  # NVML call -> error


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedHandle:
    """A card's handle: equal by index, as two NVML handles of one card point alike."""

    index: int


class RecordedEventSet:
    """An NVML event set: the events of the cards registered on it, oldest first."""

    __slots__ = ("events", "freed")

    def __init__(self) -> None:
        self.events: deque[SimpleNamespace] = deque()
        self.freed = False


class RecordedNvml:
    """A pynvml-like module over a recording. Not thread-safe (nor is one adapter)."""

    NVMLError = pynvml.NVMLError
    NVMLError_Uninitialized = pynvml.NVMLError_Uninitialized
    NVMLError_InvalidArgument = pynvml.NVMLError_InvalidArgument
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_NotFound = pynvml.NVMLError_NotFound
    NVMLError_Timeout = pynvml.NVMLError_Timeout
    NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
    NVMLError_ResetRequired = pynvml.NVMLError_ResetRequired
    NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError  # noqa: N815

    def __init__(
        self,
        cards: list[RecordedCard],
        *,
        driver: str = "",
        source: str = "",
        init_error: type[Exception] | None = None,
    ) -> None:
        self.cards = cards
        self.driver = driver
        self.source = source  # where the recording's figures come from
        self.init_error = init_error  # what nvmlInit raises: a node whose NVML does not start
        self.calls: Counter[str] = Counter()  # NVML calls made, by function name
        self._initialised = 0
        self._clock = 0  # NVML's sample timestamps (microseconds); a tick a sampling call
        self._watched: dict[int, list[RecordedEventSet]] = {}

    # -- building one --------------------------------------------------------------------

    @classmethod
    def load(cls, name: str) -> RecordedNvml:
        """A shipped recording by name (``recordings/NAME.json``)."""
        if name not in recording_names():
            raise InvalidInput(
                f"no recording named {name!r}",
                field="recording",
                fix=f"use one of {', '.join(recording_names())}",
            )
        folder = resources.files(__package__).joinpath("recordings")
        return cls.from_json(folder.joinpath(f"{name}.json").read_text(encoding="utf-8"))

    @classmethod
    def from_json(cls, text: str) -> RecordedNvml:
        """A recording's JSON: ``driver``, ``source`` and ``cards`` (each ``name``, ``uuid``,
        ``pci_bus_id``, ``memory_total_mib``, optionally ``memory_used_mib``,
        ``utilisation``, ``temperature``, ``power_w``, ``pcie_replays``,
        ``remapped_rows`` {correctable, uncorrectable, pending, failure} and
        ``processes`` [{pid, memory_mib, utilisation}])."""
        try:
            document = json.loads(text)
            cards = [_card(entry) for entry in document["cards"]]
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInput(
                f"not a recording of NVML: {error!r}",
                field="cards",
                fix="give each card name, uuid, pci_bus_id and memory_total_mib",
            ) from error
        return cls(cards, driver=str(document.get("driver", "")), source=document.get("source", ""))

    @classmethod
    def absent(cls, error: type[Exception] = pynvml.NVMLError_LibraryNotFound) -> RecordedNvml:
        """A node whose NVML does not start: ``nvmlInit`` raises ``error``."""
        return cls([], init_error=error)

    # -- changing the cards, as a test or a demo goes ------------------------------------

    def set(self, index: int, **figures: Any) -> None:
        """Set figures of card ``index`` (``RecordedCard``'s fields: ``utilisation=90``,
        ``memory_used=40 * MIB`` ...)."""
        card = self.cards[index]
        for name, value in figures.items():
            if name not in RecordedCard.__dataclass_fields__ or name in ("processes", "refused"):
                raise InvalidInput(f"a recorded card has no figure {name!r}", field=name)
            setattr(card, name, value)

    def add_process(
        self, index: int, pid: int, *, memory: int | None = None, utilisation: float | None = None
    ) -> None:
        """A compute process on card ``index`` (again: its figures change)."""
        process = RecordedProcess(pid=pid, memory=memory, utilisation=utilisation)
        self.cards[index].processes[pid] = process

    def end_process(self, index: int, pid: int) -> None:
        """The process leaves card ``index``."""
        self.cards[index].processes.pop(pid, None)

    def raise_xid(self, index: int, xid: int) -> None:
        """Card ``index`` raises XID ``xid``: queued on each event set it is registered on."""
        for events in self._watched.get(index, ()):
            events.events.append(
                SimpleNamespace(
                    device=RecordedHandle(index=index),
                    eventType=pynvml.nvmlEventTypeXidCriticalError,
                    eventData=xid,
                    gpuInstanceId=0xFFFFFFFF,
                    computeInstanceId=0xFFFFFFFF,
                )
            )

    def lose(self, index: int, *, lost: bool = True) -> None:
        """Card ``index`` falls off the bus (every call on it raises ``GpuIsLost``), or
        with ``lost=False`` comes back."""
        self.cards[index].lost = lost

    def refuse(
        self, index: int, figure: str, error: type[Exception] = pynvml.NVMLError_NotSupported
    ) -> None:
        """Card ``index`` answers every call behind ``figure`` (a key of ``FIELDS``) with
        ``error``: by default NVML's NotSupported."""
        if figure not in FIELDS:
            raise InvalidInput(
                f"no figure {figure!r} to refuse", field="figure", fix=f"one of {', '.join(FIELDS)}"
            )
        for call in FIELDS[figure]:
            self.cards[index].refused[call] = error

    # -- NVML ------------------------------------------------------------------------

    def nvmlInit(self) -> None:  # noqa: N802  # NVML's names
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise self.init_error()
        self._initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._ready("nvmlShutdown")
        self._initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._ready("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._ready("nvmlDeviceGetCount")
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> RecordedHandle:  # noqa: N802
        self._ready("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.cards):
            raise pynvml.NVMLError_InvalidArgument()
        if self.cards[index].lost:
            raise pynvml.NVMLError_GpuIsLost()
        return RecordedHandle(index=index)

    def nvmlDeviceGetIndex(self, handle: RecordedHandle) -> int:  # noqa: N802
        self._card(handle, "nvmlDeviceGetIndex")
        return handle.index

    def nvmlDeviceGetUUID(self, handle: RecordedHandle) -> str:  # noqa: N802
        return self._card(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, handle: RecordedHandle) -> str:  # noqa: N802
        return self._card(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetPciInfo(self, handle: RecordedHandle) -> SimpleNamespace:  # noqa: N802
        card = self._card(handle, "nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId=card.pci_bus_id.encode())  # bytes, as nvidia-ml-py's

    def nvmlDeviceGetMemoryInfo(self, handle: RecordedHandle) -> SimpleNamespace:  # noqa: N802
        card = self._card(handle, "nvmlDeviceGetMemoryInfo")
        used = min(card.memory_used, card.memory_total)
        return SimpleNamespace(total=card.memory_total, used=used, free=card.memory_total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: RecordedHandle) -> SimpleNamespace:  # noqa: N802
        card = self._card(handle, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=card.utilisation, memory=0)

    def nvmlDeviceGetTemperature(self, handle: RecordedHandle, sensor: int) -> int:  # noqa: N802
        card = self._card(handle, "nvmlDeviceGetTemperature")
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError_InvalidArgument()
        return card.temperature

    def nvmlDeviceGetPowerUsage(self, handle: RecordedHandle) -> int:  # noqa: N802
        return round(self._card(handle, "nvmlDeviceGetPowerUsage").power * 1000)  # milliwatts

    def nvmlDeviceGetRemappedRows(self, handle: RecordedHandle) -> tuple[int, int, int, int]:  # noqa: N802
        card = self._card(handle, "nvmlDeviceGetRemappedRows")
        return (
            card.remapped_correctable,
            card.remapped_uncorrectable,
            int(card.remap_pending),
            int(card.remap_failure),
        )

    def nvmlDeviceGetPcieReplayCounter(self, handle: RecordedHandle) -> int:  # noqa: N802
        return self._card(handle, "nvmlDeviceGetPcieReplayCounter").pcie_replays

    def nvmlDeviceGetComputeRunningProcesses(self, handle: RecordedHandle) -> list[SimpleNamespace]:  # noqa: N802
        card = self._card(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(
                pid=p.pid,
                usedGpuMemory=p.memory,  # None where NVML does not say, as nvidia-ml-py gives it
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
            for p in card.processes.values()
        ]

    def nvmlDeviceGetProcessUtilization(  # noqa: N802
        self,
        handle: RecordedHandle,
        timeStamp: int,  # noqa: N803  # nvidia-ml-py's name
    ) -> list[SimpleNamespace]:
        """A sample of each process that has a utilisation, stamped newer than any
        before; NotFound where none has one (as NVML says it has no sample)."""
        card = self._card(handle, "nvmlDeviceGetProcessUtilization")
        self._clock += 1
        samples = [
            SimpleNamespace(
                pid=p.pid,
                timeStamp=self._clock,
                smUtil=round(p.utilisation),
                memUtil=0,
                encUtil=0,
                decUtil=0,
            )
            for p in card.processes.values()
            if p.utilisation is not None and self._clock > timeStamp
        ]
        if not samples:
            raise pynvml.NVMLError_NotFound()
        return samples

    def nvmlEventSetCreate(self) -> RecordedEventSet:  # noqa: N802
        self._ready("nvmlEventSetCreate")
        return RecordedEventSet()

    def nvmlDeviceRegisterEvents(  # noqa: N802
        self,
        handle: RecordedHandle,
        eventTypes: int,  # noqa: N803
        eventSet: RecordedEventSet,  # noqa: N803
    ) -> None:
        self._card(handle, "nvmlDeviceRegisterEvents")
        if eventTypes & pynvml.nvmlEventTypeXidCriticalError:
            self._watched.setdefault(handle.index, []).append(eventSet)

    def nvmlEventSetWait_v2(self, eventSet: RecordedEventSet, timeoutms: int) -> SimpleNamespace:  # noqa: N802, N803
        """The oldest waiting event; Timeout at once when none waits (a recording does
        not wait ``timeoutms``)."""
        self._ready("nvmlEventSetWait_v2")
        if eventSet.freed:
            raise pynvml.NVMLError_InvalidArgument()
        if not eventSet.events:
            raise pynvml.NVMLError_Timeout()
        return eventSet.events.popleft()

    def nvmlEventSetFree(self, eventSet: RecordedEventSet) -> None:  # noqa: N802, N803
        self._ready("nvmlEventSetFree")
        eventSet.freed = True
        for sets in self._watched.values():
            if eventSet in sets:
                sets.remove(eventSet)

    # -- the same checks as NVML's -------------------------------------------------------

    def _ready(self, call: str) -> None:
        self.calls[call] += 1
        if self._initialised <= 0:
            raise pynvml.NVMLError_Uninitialized()

    def _card(self, handle: RecordedHandle, call: str) -> RecordedCard:
        self._ready(call)
        if not isinstance(handle, RecordedHandle) or not 0 <= handle.index < len(self.cards):
            raise pynvml.NVMLError_InvalidArgument()
        card = self.cards[handle.index]
        if card.lost:
            raise pynvml.NVMLError_GpuIsLost()
        if call in card.refused:
            raise card.refused[call]()
        return card


def recording_names() -> tuple[str, ...]:
    """The shipped recordings, sorted."""
    folder = resources.files(__package__).joinpath("recordings")
    return tuple(
        sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))
    )


def _card(entry: dict[str, Any]) -> RecordedCard:
    rows = entry.get("remapped_rows", {})
    card = RecordedCard(
        name=str(entry["name"]),
        uuid=str(entry["uuid"]),
        pci_bus_id=str(entry["pci_bus_id"]),
        memory_total=int(entry["memory_total_mib"]) * MIB,
        memory_used=int(entry.get("memory_used_mib", 0)) * MIB,
        utilisation=int(entry.get("utilisation", 0)),
        temperature=int(entry.get("temperature", 0)),
        power=float(entry.get("power_w", 0.0)),
        pcie_replays=int(entry.get("pcie_replays", 0)),
        remapped_correctable=int(rows.get("correctable", 0)),
        remapped_uncorrectable=int(rows.get("uncorrectable", 0)),
        remap_pending=bool(rows.get("pending", False)),
        remap_failure=bool(rows.get("failure", False)),
    )
    for process in entry.get("processes", ()):
        memory = process.get("memory_mib")
        card.processes[int(process["pid"])] = RecordedProcess(
            pid=int(process["pid"]),
            memory=None if memory is None else int(memory) * MIB,
            utilisation=process.get("utilisation"),
        )
    return card
