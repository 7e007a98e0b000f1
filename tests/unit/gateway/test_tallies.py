"""The gateway's tallies: counts that only grow, windows as differences, and a latency
quantile estimated as Prometheus's histogram_quantile does."""

from __future__ import annotations

import threading

import pytest

from phalanx.gateway.tallies import LATENCY_BUCKETS, Tallies, Tally


def test_answers_are_counted_per_predictor_with_5xx_as_errors() -> None:
    tallies = Tallies()
    for status in (200, 200, 404, 500, 503):
        tallies.record("svc", "main", status, 0.002)
    tallies.record("svc", "canary", 502, 0.2)
    main = tallies.read("svc", "main")
    assert (main.requests, main.errors) == (5, 2)
    assert main.error_rate == pytest.approx(0.4)
    assert tallies.read("svc", "canary").errors == 1
    assert tallies.read("svc", "nothing") == Tally()
    assert Tally().error_rate == 0.0 and Tally().quantile(0.99) is None


def test_a_window_is_the_difference_of_two_readings() -> None:
    tallies = Tallies()
    for _ in range(10):
        tallies.record("s", "p", 200, 0.001)
    before = tallies.read("s", "p")
    for _ in range(4):
        tallies.record("s", "p", 500, 3.0)
    window = tallies.read("s", "p").since(before)
    assert (window.requests, window.errors) == (4, 4)
    assert sum(window.buckets) == 4
    assert window.quantile(0.5) == pytest.approx(2.5 + (5.0 - 2.5) * 0.5)


def test_quantiles_interpolate_within_the_bucket_and_stop_at_the_last_bound() -> None:
    tallies = Tallies()
    for _ in range(100):  # all in (0.01, 0.025]
        tallies.record("s", "p", 200, 0.02)
    tally = tallies.read("s", "p")
    assert tally.quantile(0.5) == pytest.approx(0.01 + 0.015 * 0.5)
    assert tally.quantile(0.99) == pytest.approx(0.01 + 0.015 * 0.99)
    exact = Tallies()
    exact.record("s", "p", 200, 0.001)  # on a bound: in that bucket (le)
    assert exact.read("s", "p").buckets[0] == 1
    slow = Tallies()
    slow.record("s", "p", 200, 100.0)
    assert slow.read("s", "p").quantile(0.99) == LATENCY_BUCKETS[-1]


def test_counts_are_exact_from_many_threads() -> None:
    tallies = Tallies()

    def hammer() -> None:
        for i in range(2_000):
            tallies.record("s", "p", 500 if i % 4 == 0 else 200, 0.01)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tally = tallies.read("s", "p")
    assert (tally.requests, tally.errors, sum(tally.buckets)) == (8_000, 2_000, 8_000)


def test_tallies_of_two_gateways_add_and_a_restart_never_counts_negative() -> None:
    one, two = Tallies(), Tallies()
    for _ in range(3):
        one.record("s", "p", 500, 0.01)
    two.record("s", "p", 200, 0.01)
    both = one.read("s", "p").plus(two.read("s", "p"))
    assert (both.requests, both.errors, sum(both.buckets)) == (4, 3, 4)
    restarted = two.read("s", "p").since(both)  # counts that went down: none
    assert (restarted.requests, restarted.errors, sum(restarted.buckets)) == (0, 0, 0)
    assert {(s, p) for s, p, _ in one.rows()} == {("s", "p")}
