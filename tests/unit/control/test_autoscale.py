"""The KPA autoscaler: the stable window's average at 70% of the target, panic on a
burst at twice the replicas (never scaling down in panic, for a whole stable window),
and the predictor's bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from phalanx.control.controllers.autoscale import Autoscaler


def fed(scaler: Autoscaler, start: float, seconds: int, demand: float) -> float:
    """Observe ``demand`` once a second for ``seconds`` from ``start``; the last time."""
    now = start
    for i in range(seconds):
        now = start + i
        scaler.observe(now, demand)
    return now


def test_the_stable_window_sets_the_count_at_seventy_percent_of_the_target() -> None:
    scaler = Autoscaler(target=10)
    now = fed(scaler, 0, 60, 14.0)
    assert scaler.desired(now, current=2, low=1, high=10) == 2  # 14 / 7
    now = fed(scaler, 60, 60, 21.0)
    assert scaler.desired(now, current=2, low=1, high=10) == 3
    assert scaler.desired(now, current=3, low=1, high=2) == 2  # maxReplicas
    now = fed(scaler, 120, 60, 0.0)
    assert scaler.desired(now, current=3, low=1, high=10) == 1  # minReplicas


def test_a_burst_panics_and_panic_never_scales_down_for_a_stable_window() -> None:
    scaler = Autoscaler(target=10)
    now = fed(scaler, 0, 60, 7.0)
    assert scaler.desired(now, current=1, low=1, high=20) == 1
    now = fed(scaler, 60, 2, 70.0)  # ten times the load, for two seconds
    burst = scaler.desired(now, current=1, low=1, high=20)
    assert burst >= 4  # the panic window's average, not the stable one's (2)
    now = fed(scaler, 62, 30, 0.0)
    assert scaler.desired(now, current=burst, low=1, high=20) == burst  # held in panic
    now = fed(scaler, 92, 40, 0.0)
    assert scaler.desired(now, current=burst, low=1, high=20) == 1  # panic over


@given(
    demands=st.lists(st.floats(0, 1_000), min_size=1, max_size=100),
    current=st.integers(0, 50),
    low=st.integers(0, 5),
    span=st.integers(0, 50),
)
def test_the_answer_stays_within_the_bounds(
    demands: list[float], current: int, low: int, span: int
) -> None:
    scaler = Autoscaler(target=3)
    for i, demand in enumerate(demands):
        scaler.observe(float(i), demand)
    assert low <= scaler.desired(float(len(demands)), current, low, low + span) <= low + span
