"""Fairness between users: Jain's index per window of GPU-time against max-min fair shares."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.sim.metrics import JobRecord, Metrics
from phalanx.sim.userfair import DAY, Window, jain, summary, user_figures, water_fill, windows

HOUR = 3600.0


def test_jain_is_one_for_equal_shares_and_one_over_n_when_one_takes_all() -> None:
    assert jain([0.5, 0.5, 0.5, 0.5]) == pytest.approx(1.0)
    assert jain([4.0, 0.0, 0.0, 0.0]) == pytest.approx(1 / 4)
    assert jain([1.0, 0.0]) == pytest.approx(1 / 2)
    assert jain([0.0, 0.0]) == 1.0  # all equally stalled
    assert jain([]) == 1.0


def test_water_fill_splits_equally_and_hands_on_what_a_light_user_leaves() -> None:
    two = water_fill(np.array([[10.0, 10.0], [2.0, 10.0], [1.0, 1.0]]), 8.0)
    assert two.tolist() == [[4.0, 4.0], [2.0, 6.0], [1.0, 1.0]]  # never above demand
    three = water_fill(np.array([[1.0, 5.0, 10.0], [0.0, 3.0, 0.0], [9.0, 2.0, 9.0]]), 8.0)
    assert three.tolist() == [[1.0, 3.5, 3.5], [0.0, 3.0, 0.0], [3.0, 2.0, 3.0]]


Steps = dict[str, list[tuple[float, float]]]


def _day(demand: Steps, held: Steps, end: float = DAY) -> list[Window]:
    """Windows of a day on 8 GPUs from 0 to ``end``."""
    return windows(demand, held, capacity=8.0, start=0.0, end=end)


def test_equal_users_given_equal_halves_are_perfectly_fair() -> None:
    both = {"a": [(0.0, 8.0)], "b": [(0.0, 8.0)]}
    [window] = _day(both, {"a": [(0.0, 4.0)], "b": [(0.0, 4.0)]})
    assert window.users == ("a", "b") and window.index == pytest.approx(1.0)
    assert window.fair == (4 * DAY, 4 * DAY) and window.received == (4 * DAY, 4 * DAY)


def test_one_user_taking_everything_from_n_demanding_users_scores_one_over_n() -> None:
    demand = {u: [(0.0, 8.0)] for u in ("a", "b", "c")}
    [window] = _day(demand, {"a": [(0.0, 8.0)]})
    assert window.index == pytest.approx(1 / 3)


def test_a_window_with_one_active_user_is_not_counted() -> None:
    # a alone on day 0 (takes all: fine, nobody else wants any), a and b on day 1, fairly
    demand = {"a": [(0.0, 8.0)], "b": [(DAY, 8.0)]}
    held = {"a": [(0.0, 8.0), (DAY, 4.0)], "b": [(DAY, 4.0)]}
    found = _day(demand, held, end=2 * DAY)
    assert [w.users for w in found] == [("a",), ("a", "b")]
    assert summary(found) == {"user_jain_mean": 1.0, "user_jain_min": 1.0, "user_jain_windows": 1}


def test_users_with_different_demands_are_judged_against_what_they_asked() -> None:
    # a wants 2 GPUs and gets them, b wants 20 and gets the other 6 of 8: max-min fair
    [window] = _day({"a": [(0.0, 2.0)], "b": [(0.0, 20.0)]}, {"a": [(0.0, 2.0)], "b": [(0.0, 6.0)]})
    assert window.index == pytest.approx(1.0)
    # an equal 4/4 split of received GPUs would be unfair to b here; a given 4 is impossible
    # (a holds no more than it asks), so: a given 1 of its 2 while b holds 7
    [short] = _day({"a": [(0.0, 2.0)], "b": [(0.0, 20.0)]}, {"a": [(0.0, 1.0)], "b": [(0.0, 7.0)]})
    x = [0.5, 7 / 6]
    assert short.index == pytest.approx(sum(x) ** 2 / (2 * sum(v * v for v in x)))


def test_a_user_arriving_mid_window_is_owed_a_share_only_from_then() -> None:
    # b demands from noon; a fair scheduler gives each half from then: fair, not 0.8
    demand = {"a": [(0.0, 8.0)], "b": [(DAY / 2, 8.0)]}
    held = {"a": [(0.0, 8.0), (DAY / 2, 4.0)], "b": [(DAY / 2, 4.0)]}
    [window] = _day(demand, held)
    assert window.fair == (6 * DAY, 2 * DAY) and window.index == pytest.approx(1.0)


def test_windows_have_the_given_length_and_the_last_is_cut_at_the_end() -> None:
    demand = {"a": [(0.0, 8.0)], "b": [(0.0, 8.0)]}
    held = {"a": [(0.0, 8.0), (6 * HOUR, 4.0)], "b": [(6 * HOUR, 4.0)]}
    found = windows(demand, held, capacity=8.0, start=0.0, end=15 * HOUR, window=6 * HOUR)
    assert [(w.start, w.end) for w in found] == [(0.0, 6 * HOUR), (6 * HOUR, 12 * HOUR),
                                                 (12 * HOUR, 15 * HOUR)]  # fmt: skip
    assert [round(w.index, 6) for w in found] == [0.5, 1.0, 1.0]
    assert summary(found) == {
        "user_jain_mean": 0.833333,
        "user_jain_min": 0.5,
        "user_jain_windows": 3,
    }
    with pytest.raises(ValueError, match="positive"):
        windows(demand, held, capacity=8.0, start=0.0, end=1.0, window=0.0)


def test_user_figures_are_none_for_a_single_user_and_spread_waits_otherwise() -> None:
    one = user_figures({"default": {"avg_wait_s": 50.0, "starvation_s": 90.0}}, [])
    assert one["users"] == 1 and one["user_window_s"] == DAY
    assert all(one[key] is None for key in ("user_jain_mean", "user_jain_min",
               "user_worst_avg_wait_s", "user_max_wait_s", "user_wait_max_over_mean"))  # fmt: skip
    rows = {"a": {"avg_wait_s": 30.0, "starvation_s": 100.0},
            "b": {"avg_wait_s": 0.0, "starvation_s": 0.0},
            "c": {"avg_wait_s": 0.0, "starvation_s": 5.0}}  # fmt: skip
    many = user_figures(rows, [])
    assert many["user_worst"] == "a" and many["user_worst_avg_wait_s"] == 30.0
    assert many["user_max_wait_s"] == 100.0
    assert many["user_wait_max_over_mean"] == pytest.approx(3.0)  # one user does all the waiting
    assert many["user_jain_mean"] is None and many["user_jain_windows"] == 0
    calm = user_figures({"a": {"avg_wait_s": 0.0}, "b": {"avg_wait_s": 0.0}}, [])
    assert calm["user_wait_max_over_mean"] == 1.0


def _record(name: str, user: str, gpus: float, submit: float) -> JobRecord:
    return JobRecord(name=name, queue="q", user=user, gpus=gpus, duration=HOUR, submit=submit)


def test_metrics_report_per_user_figures_from_the_runs_events() -> None:
    # 8 GPUs; a's two 8-GPU jobs run back to back while b's 8-GPU job waits for both
    metrics = Metrics(total_gpus=8.0, queue_guarantees={}, queue_deserved={})
    for name, user in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        metrics.submitted(_record(name, user, 8.0, 0.0))
    for name, user, at in (("a1", "a", 0.0), ("a2", "a", HOUR), ("b1", "b", 2 * HOUR)):
        metrics.allocation(at, "q", user, {"gpu": 8.0}, 1.0)
        metrics.started(at, name)
        metrics.allocation(at + HOUR, "q", user, {"gpu": 8.0}, -1.0)
        metrics.ended(at + HOUR, name, "finished")
    result = metrics.summary(sim_wall_s=0.0, fairness_window=HOUR)
    per_user = result["per_user"]
    assert isinstance(per_user, dict)
    assert per_user["a"]["gpu_time_s"] == 16 * HOUR and per_user["b"]["gpu_time_s"] == 8 * HOUR
    assert per_user["a"]["avg_wait_s"] == HOUR / 2 and per_user["b"]["starvation_s"] == 2 * HOUR
    assert per_user["b"]["avg_jct_s"] == 3 * HOUR
    # hours 0 and 1: a holds all while b waits (1/2); hour 2: b alone (not counted)
    assert result["user_jain_mean"] == 0.5 and result["user_jain_windows"] == 2
    assert result["user_worst"] == "b" and result["user_max_wait_s"] == 2 * HOUR
    assert result["users"] == 2 and result["user_window_s"] == HOUR
