"""The NVML adapter, run on recorded nodes (``RecordedNvml``) and on this host's real
nvidia-ml-py (which finds no libnvidia-ml here)."""

from __future__ import annotations

import ctypes.util
import logging
import re
import sys
from typing import Any

import pynvml  # type: ignore[import-untyped]
import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Gpu
from phalanx.executors import gpus
from phalanx.telemetry.nvml import Nvml, NvmlAbsent, open_nvml
from phalanx.telemetry.readings import CardReading, ProcessUse
from phalanx.telemetry.recorded import MIB, RecordedNvml, recording_names

H100_0 = "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
#: This host has a driver's NVML library: the "no NVML here" checks do not apply.
HAS_NVML = ctypes.util.find_library("nvidia-ml") is not None


def opened(name: str = "h100-sxm-8") -> tuple[RecordedNvml, Nvml]:
    fake = RecordedNvml.load(name)
    nvml = open_nvml(fake)
    assert isinstance(nvml, Nvml)
    return fake, nvml


def test_a_recorded_h100_node_reads_as_nvidia_smi_printed_it() -> None:
    _, nvml = opened()
    cards = nvml.read()
    assert nvml.driver == "535.161.08"
    assert [c.index for c in cards] == list(range(8))
    assert cards[0] == CardReading(
        index=0,
        uuid=H100_0,
        model="NVIDIA H100 80GB HBM3",
        pci_bus_id="00000000:19:00.0",  # nvidia-ml-py gives it as bytes
        memory_used=552 * MIB,
        memory_total=81559 * MIB,
        temperature=29.0,
        power=67.74,  # NVML's milliwatts, in watts
        pcie_replays=67,
    )
    assert all(c.error is None and c.processes == () for c in cards)


def test_the_inventory_lists_each_card_with_its_model_and_memory() -> None:
    _, nvml = opened()
    assert nvml.inventory()[7] == Gpu(
        index=7, model="NVIDIA H100 80GB HBM3", memory=float(81559 * MIB)
    )
    assert len(nvml.inventory()) == 8


def test_handles_and_identities_are_looked_up_once_at_open() -> None:
    fake, nvml = opened()
    for _ in range(3):
        nvml.read()
    for call in ("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo"):
        assert fake.calls[call] == 8, call
    assert fake.calls["nvmlDeviceGetTemperature"] == 24  # the figures, every read


def test_figures_follow_the_card_as_it_changes() -> None:
    fake, nvml = opened()
    fake.set(2, utilisation=97, memory_used=70_000 * MIB, temperature=71, power=612.5)
    fake.set(2, remapped_correctable=3, pcie_replays=80)
    card = nvml.read()[2]
    assert (card.utilisation, card.memory_used, card.memory_free) == (
        97.0,
        70_000 * MIB,
        11_559 * MIB,
    )
    assert (card.temperature, card.power) == (71.0, 612.5)
    assert (card.remapped_correctable, card.pcie_replays) == (3, 80)


def test_a_figure_the_card_does_not_give_reads_zero_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, nvml = opened()
    fake.refuse(1, "power")
    fake.refuse(1, "remapped_rows")
    fake.set(1, remap_pending=True)
    with caplog.at_level(logging.DEBUG, logger="phalanx.telemetry.nvml"):
        first = nvml.read()[1]
        second = nvml.read()[1]
    assert first == second
    assert (first.power, first.remap_pending, first.error) == (0.0, False, None)
    assert first.temperature == 29.0  # the card's other figures read on
    said = sorted(r.getMessage() for r in caplog.records)
    assert said == [
        "GPU 1: NVML does not give its power (Not Supported); it reads 0",
        "GPU 1: NVML does not give its remapped rows (Not Supported); it reads 0",
    ]


def test_any_other_nvml_error_on_a_figure_reads_zero_too() -> None:
    fake, nvml = opened()
    fake.refuse(0, "temperature", pynvml.NVMLError_NoPermission)
    fake.refuse(0, "processes", pynvml.NVMLError_Unknown)
    card = nvml.read()[0]
    assert (card.temperature, card.processes, card.error) == (0.0, (), None)


def test_a_lost_card_reads_with_its_error_and_zeros_the_others_read_on() -> None:
    fake, nvml = opened()
    fake.set(3, utilisation=50)
    fake.lose(3)
    cards = nvml.read()
    assert cards[3] == CardReading(
        index=3,
        uuid="GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99",
        model="NVIDIA H100 80GB HBM3",
        pci_bus_id="00000000:5D:00.0",
        error="NVML cannot read the card: GPU is lost",
    )
    assert all(c.error is None for c in cards if c.index != 3)
    fake.lose(3, lost=False)
    assert nvml.read()[3].utilisation == 50.0


def test_a_figure_that_says_the_card_needs_a_reset_ends_its_reading() -> None:
    fake, nvml = opened()
    fake.refuse(5, "pcie_replays", pynvml.NVMLError_ResetRequired)
    card = nvml.read()[5]
    assert card.error == "NVML cannot read the card: GPU requires restart"
    assert (card.memory_total, card.temperature) == (0, 0.0)


def test_a_card_lost_before_open_is_left_out_of_the_inventory_and_reads_lost() -> None:
    fake = RecordedNvml.load("h100-sxm-8")
    fake.lose(6)
    nvml = open_nvml(fake)
    assert isinstance(nvml, Nvml)
    assert [g.index for g in nvml.inventory()] == [0, 1, 2, 3, 4, 5, 7]
    card = nvml.read()[6]
    assert (card.index, card.uuid, card.error) == (6, "", "NVML cannot read the card: GPU is lost")


def test_xids_are_drained_at_each_read_oldest_first_and_the_last_is_kept() -> None:
    fake, nvml = opened()
    fake.raise_xid(4, 13)
    fake.raise_xid(2, 94)
    fake.raise_xid(4, 79)
    cards = nvml.read()
    assert (cards[4].xids, cards[4].xid) == ((13, 79), 79)
    assert (cards[2].xids, cards[2].xid) == ((94,), 94)
    assert all(c.xids == () and c.xid == 0 for c in cards if c.index not in (2, 4))
    again = nvml.read()  # since the previous read: none; the last seen stays
    assert (again[4].xids, again[4].xid) == ((), 79)


def test_the_drain_never_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, nvml = opened()
    waits: list[int] = []
    wait = fake.nvmlEventSetWait_v2

    def spy(events: Any, timeout: int) -> Any:
        waits.append(timeout)
        return wait(events, timeout)

    monkeypatch.setattr(fake, "nvmlEventSetWait_v2", spy)
    fake.raise_xid(0, 48)
    nvml.read()
    assert waits == [0, 0]  # the event, then Timeout at once


def test_a_lost_card_still_reports_its_xid() -> None:
    fake, nvml = opened()
    fake.raise_xid(1, 79)
    fake.lose(1)
    card = nvml.read()[1]
    assert (card.xids, card.error) == ((79,), "NVML cannot read the card: GPU is lost")


def test_a_card_that_cannot_watch_xids_reads_without_them() -> None:
    fake = RecordedNvml.load("h100-sxm-8")
    fake.refuse(0, "xids")
    nvml = open_nvml(fake)
    assert isinstance(nvml, Nvml)
    fake.raise_xid(0, 79)
    fake.raise_xid(1, 79)
    cards = nvml.read()
    assert (cards[0].xids, cards[1].xids, cards[0].error) == ((), (79,), None)


def test_processes_with_their_memory_and_share_of_the_sms() -> None:
    fake, nvml = opened("rtx4090-8")
    card = nvml.read()[0]
    assert card.processes == (ProcessUse(pid=58130, memory=20322 * MIB),)  # recorded
    fake.add_process(0, 4242, memory=1024 * MIB, utilisation=35.0)
    fake.add_process(0, 4243)  # NVML does not say its memory, nor samples it
    fake.add_process(
        0, 4244, memory=2**64 - 1
    )  # NVML_VALUE_NOT_AVAILABLE, as older bindings give it
    card = nvml.read()[0]
    assert card.processes == (
        ProcessUse(pid=58130, memory=20322 * MIB),
        ProcessUse(pid=4242, memory=1024 * MIB, utilisation=35.0),
        ProcessUse(pid=4243, memory=None),
        ProcessUse(pid=4244, memory=None),
    )
    fake.end_process(0, 4242)
    assert [p.pid for p in nvml.read()[0].processes] == [58130, 4243, 4244]


def test_no_sample_of_any_process_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    _, nvml = opened("rtx4090-8")  # processes listed, none sampled: NVML says NotFound
    with caplog.at_level(logging.DEBUG, logger="phalanx.telemetry.nvml"):
        cards = nvml.read()
    assert all(p.utilisation is None for c in cards for p in c.processes)
    assert caplog.records == []


def test_per_process_samples_are_asked_for_since_the_last_one_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, nvml = opened("rtx4090-8")
    asked: list[int] = []
    sample = fake.nvmlDeviceGetProcessUtilization

    def spy(handle: Any, since: int) -> Any:
        if handle.index == 1:
            asked.append(since)
        return sample(handle, since)

    monkeypatch.setattr(fake, "nvmlDeviceGetProcessUtilization", spy)
    nvml.read()  # NotFound: nothing seen yet
    fake.add_process(1, 7, memory=MIB, utilisation=60.0)
    assert nvml.read()[1].processes[-1].utilisation == 60.0
    nvml.read()
    assert asked[0] == asked[1] == 0
    assert asked[2] > 0  # the timestamp of the sample the second read took


def test_close_frees_the_event_set_and_shuts_nvml_down_once() -> None:
    fake, nvml = opened()
    nvml.close()
    nvml.close()
    assert (fake.calls["nvmlEventSetFree"], fake.calls["nvmlShutdown"]) == (1, 1)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            pynvml.NVMLError_LibraryNotFound,
            "NVML is not available on this node: NVML Shared Library Not Found",
        ),
        (pynvml.NVMLError_DriverNotLoaded, "NVML is not available on this node: Driver Not Loaded"),
    ],
)
def test_a_node_whose_nvml_does_not_start_says_why(error: type[Exception], reason: str) -> None:
    assert open_nvml(RecordedNvml.absent(error)) == NvmlAbsent(reason=reason)


def test_a_node_without_cards_says_so_and_shuts_nvml_down() -> None:
    fake = RecordedNvml([], driver="550.54.15")
    assert open_nvml(fake) == NvmlAbsent(reason="NVML finds no GPU on this node")
    assert fake.calls["nvmlShutdown"] == 1


def test_without_nvidia_ml_py_the_node_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    absent = open_nvml()
    assert isinstance(absent, NvmlAbsent)
    assert absent.reason.startswith("NVML is not available on this node: import of pynvml")


@pytest.mark.skipif(HAS_NVML, reason="this host has libnvidia-ml")
def test_the_real_nvidia_ml_py_here_finds_no_library() -> None:
    assert open_nvml() == NvmlAbsent(
        reason="NVML is not available on this node: NVML Shared Library Not Found"
    )


@pytest.mark.skipif(HAS_NVML, reason="this host has libnvidia-ml")
def test_nvidia_gpus_lists_none_on_a_cpu_only_host() -> None:
    assert gpus.nvidia_gpus() == ()


def test_nvidia_gpus_lists_the_cards_through_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = RecordedNvml.load("rtx4090-8")
    monkeypatch.setattr(gpus, "open_nvml", lambda: open_nvml(fake))
    listed = gpus.nvidia_gpus()
    assert [g.index for g in listed] == list(range(8))
    assert listed[0] == Gpu(index=0, model="NVIDIA GeForce RTX 4090", memory=float(24564 * MIB))
    assert fake.calls["nvmlShutdown"] == 1


def test_the_recording_raises_nvidia_ml_pys_own_errors() -> None:
    fake = RecordedNvml.load("h100-sxm-8")
    assert fake.NVMLError_NotSupported is pynvml.NVMLError_NotSupported
    assert issubclass(fake.NVMLError_GpuIsLost, pynvml.NVMLError)


@pytest.mark.parametrize("name", recording_names())
def test_each_recording_is_of_real_cards_and_names_its_source(name: str) -> None:
    fake = RecordedNvml.load(name)
    assert "nvidia-smi -q" in fake.source
    assert re.fullmatch(r"\d{3}\.\d+\.\d+", fake.driver)
    assert len(fake.cards) == 8
    for card in fake.cards:
        assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", card.uuid)
        assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", card.pci_bus_id)
        assert 0 < card.memory_used <= card.memory_total


def test_an_unknown_recording_or_figure_is_refused_naming_the_choices() -> None:
    with pytest.raises(InvalidInput, match="use one of h100-sxm-8, rtx4090-8"):
        RecordedNvml.load("a100")
    fake = RecordedNvml.load("h100-sxm-8")
    with pytest.raises(InvalidInput, match="no figure 'fan'"):
        fake.refuse(0, "fan")
    with pytest.raises(InvalidInput, match="no figure 'fan'"):
        fake.set(0, fan=50)
    with pytest.raises(InvalidInput, match="not a recording of NVML"):
        RecordedNvml.from_json('{"cards": [{"name": "x"}]}')
