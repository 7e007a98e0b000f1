"""The usage book: decayed use is the exact integral of each run's weight, periods sum
exactly what fell in them, and a book moves between dimension sets without loss."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.job import TaskPhase
from phalanx.engine.snapshot.usage import (
    HELD_NOISE,
    HOUR,
    UsageBook,
    decay_integral,
    decayed_usage,
    period_start,
    spent,
)
from phalanx.engine.state import ClusterState
from tests.builders import make_job, make_nodes, make_queue

DAY = 86400.0
KEY = ("default", "alice")


def test_use_a_half_life_ago_counts_half() -> None:
    book = UsageBook(("gpu",), half_life=DAY)
    book.bank(KEY, np.array([1.0]), 0.0, 1.0)  # one GPU-second at t = 0..1
    assert book.decayed(KEY, 1.0)[0] == pytest.approx(DAY / math.log(2) * (1 - 2 ** (-1 / DAY)))
    assert book.decayed(KEY, 1.0 + DAY)[0] == pytest.approx(book.decayed(KEY, 1.0)[0] / 2)


@given(
    st.lists(
        st.tuples(st.floats(0, 1e6), st.floats(1, 1e5), st.floats(0.5, 8)),
        min_size=1,
        max_size=8,
    )
)
def test_banking_in_any_order_gives_the_integral(runs: list[tuple[float, float, float]]) -> None:
    now = 2e6
    book = UsageBook(("gpu",), half_life=DAY)
    for start, length, rate in sorted(runs, key=lambda r: -r[0]):  # latest first
        book.bank(KEY, np.array([rate]), start, start + length)
    exact = sum(rate * decay_integral(s, s + n, now, DAY) for s, n, rate in runs)
    assert book.decayed(KEY, now)[0] == pytest.approx(exact, rel=1e-9)


def test_a_period_holds_exactly_the_use_inside_it() -> None:
    book = UsageBook(("gpu",))
    book.bank(KEY, np.array([2.0]), DAY - 1800, DAY + 5400)  # crosses midnight
    since = period_start(DAY + 7200, DAY)
    assert since == DAY
    assert book.spent(KEY, since)[0] == 2.0 * 5400  # the part after midnight
    assert book.spent(KEY, 0.0)[0] == 2.0 * 7200
    assert book.spent(("default", "bob"), 0.0)[0] == 0.0
    assert HOUR == 3600.0


def test_running_tasks_count_up_to_now_and_a_leaving_task_is_banked() -> None:
    state = ClusterState(make_nodes(1), [make_queue()], half_life=DAY)
    info = state.add_job(make_job("j", gpus=4, user="alice"))
    assert info is not None
    task = info.tasks[0]
    gpu = state.snapshot.dim["gpu"]
    milli = 1000.0  # the engine counts GPUs in thousandths
    state.set_task(task, TaskPhase.BOUND, "n0", start_time=100.0)
    assert spent(state.snapshot, KEY, 1100.0, DAY)[gpu] == 4 * milli * 1000.0
    running = decayed_usage(state.snapshot, 1100.0)[KEY][gpu]
    assert running == pytest.approx(4 * milli * decay_integral(100.0, 1100.0, 1100.0, DAY))

    state.set_task(task, TaskPhase.PENDING, now=1100.0)

    assert decayed_usage(state.snapshot, 1100.0)[KEY][gpu] == pytest.approx(running)
    assert spent(state.snapshot, KEY, 5000.0, DAY)[gpu] == 4 * milli * 1000.0  # nothing since


def test_a_book_carries_its_closed_runs_to_other_dimensions_and_no_held_task() -> None:
    book = UsageBook(("cpu", "gpu"), half_life=DAY)
    book.bank(KEY, np.array([1000.0, 2.0]), 0.0, 10.0)
    book.hold(KEY, np.array([500.0, 1.0]), 5.0)
    moved = book.carried(("gpu", "rdma/hca"))
    assert moved.decayed(KEY, 10.0)[0] == book.decayed(KEY, 10.0)[1]
    assert moved.decayed(KEY, 10.0)[1] == 0.0
    assert moved.spent(KEY, 0.0).tolist() == [20.0, 0.0]
    assert moved.held_decayed(KEY, 10.0).tolist() == [0.0, 0.0]  # its state holds them again


@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.floats(0.5, 8)), min_size=1, max_size=12),
    st.floats(0, 1e6),
)
def test_held_sums_give_each_tasks_integral_up_to_now(
    tasks: list[tuple[float, float]], later: float
) -> None:
    book = UsageBook(("gpu",), half_life=DAY)
    for start, rate in tasks:
        book.hold(KEY, np.array([rate]), start)
    now = max(start for start, _ in tasks) + later
    exact = sum(rate * decay_integral(start, now, now, DAY) for start, rate in tasks)
    noise = sum(rate for _, rate in tasks) * DAY / math.log(2) * 2 * HELD_NOISE
    assert book.held_decayed(KEY, now)[0] == pytest.approx(exact, rel=1e-9, abs=noise)
    for start, rate in tasks:
        book.release(KEY, np.array([rate]), start)
    assert book.held_decayed(KEY, now)[0] == 0.0 and list(book.users()) == []


def test_held_sums_survive_a_rebase_a_year_on() -> None:
    book = UsageBook(("gpu",), half_life=3600.0)
    book.hold(KEY, np.array([1.0]), 0.0)
    book.hold(KEY, np.array([2.0]), 365 * DAY)  # 8,760 half-lives on: a new origin
    now = 365 * DAY + 7200
    exact = decay_integral(0.0, now, now, 3600.0) + 2 * decay_integral(365 * DAY, now, now, 3600.0)
    assert book.held_decayed(KEY, now)[0] == pytest.approx(exact)
    book.release(KEY, np.array([1.0]), 0.0)
    assert book.held_decayed(KEY, now)[0] == pytest.approx(
        exact - decay_integral(0.0, now, now, 3600.0)
    )
