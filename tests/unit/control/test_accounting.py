"""Usage reports from ledger rows: clipping to the window, hours, prices and savings."""

from __future__ import annotations

import pytest

from phalanx.control.accounting import By, held_seconds, report
from phalanx.control.store.usage import Allocation
from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.domain.prices import PriceClass, PriceSheet, Rates
from phalanx.spec.prices import load_prices, parse_short

GIB = 2**30


def _held(
    *,
    start: float,
    end: float | None,
    user: str = "alice",
    job: str = "a",
    gpu: float = 1,
    labels: dict[str, str] | None = None,
    reclaimable: bool = False,
    elastic: bool = False,
) -> Allocation:
    return Allocation(
        id=0,
        job=job,
        user=user,
        queue="q",
        task=f"{job}-w-0",
        role="w",
        node="n0",
        resources={"cpu": 2000.0, "memory": 4.0 * GIB, "gpu": gpu},
        gpus=(),
        labels=labels or {},
        reclaimable=reclaimable,
        elastic=elastic,
        start=start,
        end=end,
        ended_by="",
    )


def test_an_allocation_counts_only_within_the_window_and_an_open_one_up_to_now() -> None:
    closed, held = _held(start=100, end=200), _held(start=150, end=None)
    assert held_seconds(closed, since=None, until=None, now=1000) == 100
    assert held_seconds(closed, since=150, until=180, now=1000) == 30
    assert held_seconds(closed, since=250, until=None, now=1000) == 0
    assert held_seconds(held, since=None, until=None, now=400) == 250
    assert held_seconds(held, since=None, until=300, now=400) == 150


def test_adjacent_windows_add_up_to_the_whole() -> None:
    rows = [_held(start=0, end=7200), _held(start=3600, end=None, user="bob", job="b")]
    sheet = PriceSheet()
    _, whole = report(rows, sheet, by=By.USER, since=0, until=9000, now=9000)
    _, first = report(rows, sheet, by=By.USER, since=0, until=5000, now=9000)
    _, second = report(rows, sheet, by=By.USER, since=5000, until=9000, now=9000)
    assert first.gpu_hours + second.gpu_hours == pytest.approx(whole.gpu_hours)
    assert whole.gpu_hours == pytest.approx(2 + 1.5)
    assert whole.cpu_hours == pytest.approx(2 * 3.5) and whole.memory_gib_hours == 4 * 3.5


def test_rows_by_user_with_default_prices() -> None:
    rows = [_held(start=0, end=3600), _held(start=0, end=1800, user="bob", job="b")]
    items, total = report(rows, PriceSheet(), by=By.USER, since=None, until=None, now=3600)
    assert [(r.key, r.allocations) for r in items] == [("alice", 1), ("bob", 1)]
    # one hour of 2 cores (2), 4 GiB (0.5) and a GPU (10)
    assert items[0].cost == pytest.approx(12.5) and items[1].cost == pytest.approx(6.25)
    assert total.cost == pytest.approx(18.75) and total.user is None


def test_a_class_by_label_and_reclaimable_nodes_are_priced_apart_and_elastic_savings_said() -> None:
    sheet = PriceSheet(
        classes=(
            PriceClass(name="a100", match={"gpu-model": "A100"}, rates=Rates(prices={"gpu": 30})),
        ),
        reclaimable=0.25,
    )
    a100 = {"gpu-model": "A100"}
    rows = [
        _held(start=0, end=3600, labels=a100),
        _held(start=0, end=3600, job="e", labels=a100, reclaimable=True, elastic=True),
        _held(start=0, end=3600, job="f", reclaimable=True),
    ]
    items, _ = report(rows, sheet, by=By.ALLOCATION, since=None, until=None, now=3600)
    on_demand, spot, plain = items[0], items[1], items[2]
    assert on_demand.price_class == "a100" and on_demand.cost == pytest.approx(32.5)
    assert spot.cost == pytest.approx(32.5 * 0.25) and spot.saved == pytest.approx(32.5 * 0.75)
    assert plain.price_class == "default" and plain.cost == pytest.approx(12.5 * 0.25)
    assert plain.saved == 0  # not elastic: savings are said for elastic jobs


def test_a_prices_document_loads_and_a_bad_one_names_the_field_and_the_fix() -> None:
    sheet = load_prices(
        "apiVersion: phalanx/v1\nkind: Prices\nspec:\n  default: {gpu: 20}\n"
        "  classes: [{name: a100, match: {phalanx.io/gpu-model: A100}, prices: {gpu: 30},"
        " reclaimable: {multiplier: 0.5}}]\n  reclaimable: {multiplier: 0.3}\n"
    )
    assert sheet.rates("a100", reclaimable=True).get("gpu") == 15
    assert sheet.rates("default", reclaimable=True).get("gpu") == pytest.approx(6)
    assert sheet.default.get("cpu") == 1
    with pytest.raises(DocumentError, match=r"spec\.default\.cpu: .*fix: give a number >= 0"):
        load_prices("spec: {default: {cpu: -1}}")
    with pytest.raises(DocumentError, match=r"spec\.classes\[0\]\.match"):
        load_prices("spec: {classes: [{name: x, match: {}}]}")
    with pytest.raises(DocumentError, match="did you mean 'default'"):
        load_prices("spec: {defualt: {}}")


def test_the_short_form_keeps_the_defaults_it_does_not_name() -> None:
    assert parse_short("gpu=5").default.prices == {"cpu": 1.0, "memory": 0.125, "gpu": 5.0}
    with pytest.raises(InvalidInput, match="--prices: 'gpu' is not name=price"):
        parse_short("gpu")
    with pytest.raises(InvalidInput, match="'rdma' is not priced"):
        parse_short("rdma=1")
