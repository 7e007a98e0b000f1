"""Whether a card may take work: each cause, what is not a fault, and the uncordon."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.telemetry.health import CARD_XIDS, CardHealth, HealthRules
from phalanx.telemetry.readings import CardReading
from phalanx.telemetry.recorded import RecordedNvml
from phalanx.telemetry.sampler import GpuSampler

UUID = "GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99"
CARD = f"GPU 3 ({UUID})"


def reading(**fields: Any) -> CardReading:
    values: dict[str, Any] = {"index": 3, "uuid": UUID, "memory_total": 80 << 30}
    return CardReading(**(values | fields))


def judged(*readings: CardReading, rules: HealthRules | None = None) -> str | None:
    """The verdict on card 3 after the readings, 5 s apart."""
    health = CardHealth(rules)
    for n, r in enumerate(readings):
        health.observe(r, at=1000.0 + 5 * n)
    return health.verdict(3)


def test_a_healthy_card_may_take_work() -> None:
    assert judged(reading(), reading(utilisation=100.0, pcie_replays=67)) is None
    assert CardHealth().verdict(0) is None  # never seen


def test_an_xid_of_the_card_itself_is_a_verdict_naming_card_and_cause() -> None:
    assert judged(reading(), reading(xids=(79,), xid=79)) == (
        f"{CARD}: XID 79, the GPU has fallen off the bus: reboot the node"
    )


@pytest.mark.parametrize("xid", sorted(CARD_XIDS))
def test_each_card_xid_is_a_fault(xid: int) -> None:
    verdict = judged(reading(xids=(13, xid)))
    assert verdict is not None and verdict.startswith(f"{CARD}: XID {xid}, ")


@pytest.mark.parametrize(
    "xid",
    [
        13,  # graphics engine exception: the application's
        31,  # GPU memory page fault: the application's
        43,  # GPU stopped processing the application's channel
        45,  # preemptive cleanup after an earlier error
        63,  # the row remapper's event: judged by the rows
        68,  # NVDEC exception
        92,  # a high single-bit ECC rate: the catalog says ignore
        94,  # a contained memory error: the application restarts
        154,  # the recovery action changed: a note on another XID
    ],
)
def test_an_xid_the_application_causes_is_not_a_fault_of_the_card(xid: int) -> None:
    assert judged(reading(xids=(xid,), xid=xid), reading(xid=xid)) is None


def test_a_card_nvml_cannot_read_is_unfit() -> None:
    lost = reading(error="NVML cannot read the card: GPU is lost")
    assert judged(reading(), lost) == f"{CARD}: NVML cannot read the card: GPU is lost"


def test_the_xid_says_more_than_the_lost_card() -> None:
    lost = reading(xids=(79,), error="NVML cannot read the card: GPU is lost")
    assert judged(lost) == f"{CARD}: XID 79, the GPU has fallen off the bus: reboot the node"


def test_row_remapping_failed() -> None:
    assert judged(reading(remap_failure=True, remap_pending=True)) == (
        f"{CARD}: row remapping failed: its memory cannot be repaired; replace the card"
    )


def test_a_pending_row_remap_asks_for_a_reset() -> None:
    assert judged(reading(remap_pending=True)) == f"{CARD}: a row remap is pending: reset the GPU"


def test_uncorrectable_remapped_rows_that_grow() -> None:
    assert judged(reading(remapped_uncorrectable=0), reading(remapped_uncorrectable=2)) == (
        f"{CARD}: uncorrectable remapped rows went 0 -> 2: reset the GPU and run its diagnostics"
    )


def test_rows_remapped_before_sampling_began_are_history() -> None:
    assert judged(reading(remapped_uncorrectable=4, remapped_correctable=9)) is None
    assert judged(reading(remapped_correctable=0), reading(remapped_correctable=5)) is None


def test_pcie_replays_that_grow_past_the_allowance_within_the_window() -> None:
    readings = [reading(pcie_replays=67 + 15 * n) for n in range(13)]  # 60 s, +180
    assert judged(*readings) == (
        f"{CARD}: PCIe replays grew by 105 in 35 s (more than 100 in 60 s): reseat the card "
        "or check its riser and slot"
    )


def test_pcie_replays_within_the_allowance_are_not_a_fault() -> None:
    slow = [reading(pcie_replays=8 * n) for n in range(40)]  # +96 a minute, for 200 s
    assert judged(*slow) is None


def test_pcie_replays_further_apart_than_the_window_never_compare() -> None:
    health = CardHealth()
    health.observe(reading(pcie_replays=0), at=0.0)
    assert health.observe(reading(pcie_replays=500), at=61.0) is None


def test_a_replay_counter_that_restarts_with_the_driver_is_not_growth() -> None:
    assert (
        judged(reading(pcie_replays=5000), reading(pcie_replays=0), reading(pcie_replays=40))
        is None
    )


def test_a_verdict_holds_until_cleared_and_judgement_then_starts_afresh() -> None:
    health = CardHealth()
    health.observe(reading(remapped_uncorrectable=0), at=0.0)
    health.observe(reading(xids=(48,), remapped_uncorrectable=2, remap_pending=True), at=5.0)
    verdict = f"{CARD}: XID 48, an uncorrectable double-bit ECC error in its memory: reset the GPU"
    assert health.verdict(3) == verdict
    assert health.observe(reading(remapped_uncorrectable=2), at=10.0) == verdict  # healthy now
    health.clear(3)  # the admin reset the GPU and uncordons it
    assert health.verdict(3) is None
    assert health.observe(reading(remapped_uncorrectable=2), at=15.0) is None  # the new baseline
    assert health.observe(reading(remapped_uncorrectable=3), at=20.0) == (
        f"{CARD}: uncorrectable remapped rows went 2 -> 3: reset the GPU and run its diagnostics"
    )


def test_a_pending_remap_that_is_still_pending_after_the_uncordon_is_judged_again() -> None:
    health = CardHealth()
    health.observe(reading(remap_pending=True), at=0.0)
    health.clear(3)
    assert health.observe(reading(remap_pending=True), at=5.0) is not None


def test_rules_name_the_faults_and_the_allowance() -> None:
    rules = HealthRules(card_xids={13: "a graphics engine exception: drain it"}, pcie_replays=0)
    assert judged(reading(xids=(79,)), rules=rules) is None
    assert judged(reading(xids=(13,)), rules=rules) == (
        f"{CARD}: XID 13, a graphics engine exception: drain it"
    )
    assert judged(reading(pcie_replays=1), reading(pcie_replays=2), rules=rules) is not None
    with pytest.raises(InvalidInput, match="window"):
        HealthRules(window=0)


def test_a_card_without_a_uuid_is_named_by_its_index() -> None:
    assert (
        judged(reading(uuid="", remap_pending=True))
        == "GPU 3: a row remap is pending: reset the GPU"
    )


def test_a_recorded_node_judged_through_the_sampler() -> None:
    fake = RecordedNvml.load("h100-sxm-8")
    sampler, health = GpuSampler("gpu-1", nvml=fake), CardHealth()
    first = sampler.sample([], now=0.0)
    assert first is not None and health.observe_sample(first) == {}
    fake.raise_xid(5, 13)  # a kernel's bad access: the application's
    fake.raise_xid(2, 119)
    fake.set(6, remap_pending=True)
    fake.lose(7)
    second = sampler.sample([], now=5.0)
    assert second is not None
    assert health.observe_sample(second) == {
        2: "GPU 2 (GPU-167d8376-ee13-fca4-938a-a05167c43cdc): XID 119, a call to its GSP "
        "firmware timed out: reset the GPU",
        6: "GPU 6 (GPU-4ef109e9-e925-4834-2b85-0771b4ef696c): a row remap is pending: reset "
        "the GPU",
        7: "GPU 7 (GPU-b0fe4996-1f7c-91f6-0ccd-08ae3b7e23c5): NVML cannot read the card: GPU "
        "is lost",
    }
