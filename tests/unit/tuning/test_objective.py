"""The objectives: cost from the admin's prices; a feasible spec's value is its cost
(or throughput per cost); an infeasible one's is a penalty beyond every feasible value,
worse the more it misses the SLO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.load import ERROR_KINDS, LoadResult
from phalanx.tuning.objective import (
    LATENCY_CAP,
    CheapestWithinSlo,
    Limits,
    MostThroughputPerCost,
    Prices,
    ceiling_for,
)
from phalanx.tuning.space import parse_space

SLO = Limits(p99=0.25, error_rate=0.01)


def run(*, rate: float = 100, p99: float | None = 0.1, error_rate: float = 0.0) -> LoadResult:
    scheduled = int(rate * 10)
    failed = round(error_rate * scheduled)
    return LoadResult(
        rate=rate,
        duration=10,
        arrival="uniform",
        scheduled=scheduled,
        sent=scheduled,
        ok=scheduled - failed,
        errors={**dict.fromkeys(ERROR_KINDS, 0), "status": failed},
        statuses={500: failed} if failed else {},
        window=10,
        throughput=(scheduled - failed) / 10,
        p50=p99,
        p90=p99,
        p99=p99,
        max=p99,
        error_rate=failed / scheduled,
    )


def test_cost_is_quantity_times_price_over_cpu_memory_and_gpu() -> None:
    prices = Prices()
    assert prices.cost({"cpu": "500m", "memory": "2Gi", "gpu": 1}) == pytest.approx(10.75)
    assert prices.cost({"cpu": 2, "memory": 8 * 2**30, "rdma/hca": 1}) == pytest.approx(3.0)
    assert Prices(cpu=2, memory=1, gpu=0).cost({"cpu": "250m", "memory": "512Mi"}) == 1.0
    with pytest.raises(InvalidInput) as refused:
        Prices(gpu=-1)
    assert refused.value.field == "prices.gpu"


def test_the_cheapest_objective_values_a_feasible_spec_at_its_cost() -> None:
    objective = CheapestWithinSlo(limits=SLO, ceiling=100)
    score = objective.score({"cpu": "1", "memory": "2Gi"}, run(p99=0.2))
    assert score.feasible and score.value == score.cost == 1.25
    assert "within the SLO at 100 requests/s" in score.reason
    assert objective.direction == "minimize"


def test_an_infeasible_spec_is_beyond_every_cost_and_worse_the_more_it_misses() -> None:
    objective = CheapestWithinSlo(limits=SLO, ceiling=100)
    cheap, dear = {"cpu": "500m"}, {"cpu": "64"}
    slow = objective.score(cheap, run(p99=0.3))
    slower = objective.score(cheap, run(p99=0.5))
    failing = objective.score(cheap, run(p99=0.3, error_rate=0.2))
    silent = objective.score(cheap, run(p99=None, error_rate=1.0))
    assert not slow.feasible and "p99 0.3 s over the SLO 0.25 s" in slow.reason
    assert objective.score(dear, run()).value < 100 < slow.value < slower.value
    assert slow.value < failing.value < silent.value
    assert silent.value == 100 * (1 + LATENCY_CAP + 10 * 0.99)
    # every run must hold the SLO: the worst one counts
    assert objective.score(cheap, [run(), run(p99=0.5)]).value == slower.value


def test_the_cheapest_objective_needs_an_slo_and_a_ceiling_above_every_cost() -> None:
    with pytest.raises(InvalidInput) as refused:
        CheapestWithinSlo(limits=Limits(error_rate=0.01), ceiling=10)
    assert refused.value.field == "slo.p99"
    with pytest.raises(InvalidInput, match="not below the ceiling"):
        CheapestWithinSlo(limits=SLO, ceiling=10).score({"gpu": 1}, run())


@given(
    a=st.tuples(st.floats(0.01, 5), st.floats(0, 1)),
    b=st.tuples(st.floats(0.01, 5), st.floats(0, 1)),
)
def test_penalties_follow_the_violation(a: tuple[float, float], b: tuple[float, float]) -> None:
    """For both objectives, of two runs the one further outside the SLO scores worse."""
    runs = [run(p99=p99, error_rate=errors) for p99, errors in (a, b)]
    va, vb = (SLO.violation(r) for r in runs)
    cheapest = CheapestWithinSlo(limits=SLO, ceiling=100)
    ca, cb = (cheapest.score({"cpu": 1}, r).value for r in runs)
    if va > vb > 0:
        assert ca > cb
    assert (va == 0) == (ca < 100)
    most = MostThroughputPerCost(limits=SLO)
    ma, mb = (most.score({"cpu": 1}, r).value for r in runs)
    if va > vb > 0:
        assert ma < mb < 0
    assert (va == 0) == (ma >= 0)


def test_throughput_per_cost_takes_the_best_run_within_the_slo() -> None:
    objective = MostThroughputPerCost(limits=SLO)
    climb = [run(rate=100), run(rate=200, p99=0.2), run(rate=400, p99=0.9)]
    score = objective.score({"cpu": "2"}, climb)
    assert score.feasible and score.throughput == 200 and score.value == 100
    assert objective.direction == "maximize"
    missed = objective.score({"cpu": "2"}, [run(p99=0.5), run(p99=0.3)])
    assert not missed.feasible and missed.value == pytest.approx(-(0.3 / 0.25 - 1))
    # without an SLO every run counts
    assert MostThroughputPerCost().score({"cpu": "2"}, climb).value == 200


def test_throughput_per_cost_refuses_a_spec_that_costs_nothing() -> None:
    with pytest.raises(InvalidInput, match="costs nothing"):
        MostThroughputPerCost().score({"rdma/hca": 1}, run())


def test_the_ceiling_is_twice_the_dearest_candidate() -> None:
    space = parse_space(
        [
            {"name": "cpu", "category": "resources", "kind": "discrete", "values": ["1", "4"]},
            {"name": "memory", "category": "resources", "kind": "int", "low": "1Gi",
             "high": "8Gi", "step": "1Gi"},
            {"name": "N", "category": "env", "kind": "discrete", "values": [1, 2]},
        ]
    )  # fmt: skip
    assert ceiling_for(space, Prices(), {"gpu": 1, "cpu": "500m"}) == 2 * (4 + 1 + 10)
    untuned = parse_space([{"name": "N", "category": "env", "kind": "discrete", "values": [1]}])
    assert ceiling_for(untuned, Prices()) == 1.0  # nothing priced: at least 1
