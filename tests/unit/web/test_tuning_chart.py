"""The tuning chart: measured trials only, x by cost and y by p99 (or requests/s) from 0
to the largest value shown, the SLO included and drawn; the best marked."""

from __future__ import annotations

from typing import Any

from phalanx.client import TrialView, TuningView
from phalanx.web.tuning_chart import HEIGHT, TrialChart, trial_chart


def trial(
    number: int,
    cost: float | None,
    p99: float | None,
    *,
    feasible: bool = True,
    throughput: float = 10.0,
) -> TrialView:
    metrics = [] if p99 is None else [{"rate": 10, "p99": p99, "throughput": throughput}]
    return TrialView(
        number=number,
        params={"cpu": f"{number}"},
        state="Complete" if metrics else "Failed",
        message="",
        job=None,
        node=None,
        metrics=metrics,
        cost=cost,
        value=cost,
        feasible=feasible,
        created_at=0.0,
        ended_at=1.0,
    )


def tuning(objective: dict[str, Any], *trials: TrialView, best: int | None = None) -> TuningView:
    found = [t for t in trials if t.number == best]
    return TuningView(
        name="t",
        user="u",
        document={"spec": {"objective": objective}},
        phase="Succeeded",
        message="",
        trials=list(trials),
        best=found[0] if found else None,
        created_at=0.0,
        updated_at=0.0,
        ended_at=1.0,
    )


def test_cost_against_p99_with_the_slo_line_and_the_best_marked() -> None:
    chart = trial_chart(
        tuning(
            {"goal": "cheapest", "latencyP99": 0.4, "rate": 10},
            trial(0, 2.0, 0.1),
            trial(1, 1.0, 0.8, feasible=False),
            trial(2, None, None),  # never measured: not drawn
            trial(3, 0.5, 0.2),
            best=3,
        )
    )
    assert isinstance(chart, TrialChart)
    assert [p.number for p in chart.points] == [0, 1, 3]
    kinds = {p.number: p.kind for p in chart.points}
    assert kinds == {0: "feasible", 1: "missed", 3: "best"}
    assert chart.x_max == 2.0 and chart.y_max == 800.0  # ms, the slowest trial
    by = {p.number: p for p in chart.points}
    assert by[0].x == chart.right and by[1].y == chart.top  # the extremes on the edges
    assert chart.slo_y is not None and by[3].y > chart.slo_y > by[1].y  # below / above the SLO
    assert chart.bottom == HEIGHT - 28.0
    assert by[3].label == "trial 3: cpu=3; p99 200.0 ms, cost 0.5"


def test_throughput_per_cost_draws_requests_per_second_without_an_slo() -> None:
    chart = trial_chart(
        tuning({"goal": "throughputPerCost", "rates": [5, 10]}, trial(0, 1.0, 0.1, throughput=9.5))
    )
    assert chart.slo_y is None and chart.y_title == "requests/s" and chart.y_max == 9.5


def test_a_trial_far_over_the_slo_sits_on_the_top_edge() -> None:
    chart = trial_chart(
        tuning(
            {"goal": "cheapest", "latencyP99": 0.1, "rate": 10},
            trial(0, 1.0, 0.05),
            trial(1, 0.5, 8.0, feasible=False),
        )
    )
    assert chart.y_max == 400.0  # four times the SLO, not the 8 s trial
    by = {p.number: p for p in chart.points}
    assert by[1].y == chart.top  # the 8 s trial, on the top edge
    assert chart.slo_y is not None and by[0].y > chart.slo_y  # the fast one under the SLO
