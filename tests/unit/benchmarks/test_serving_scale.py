"""The scaling benchmark's figures: the median, when a replica count was reached, and when
the p50 latency fell back under its threshold for good."""

from __future__ import annotations

from phalanx.benchmarks.serving import median, reached_at, recovered_at


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([]) is None


def test_a_count_is_reached_at_the_first_sample_that_has_it() -> None:
    series = [(0.0, 1), (0.25, 1), (0.5, 3), (0.75, 2), (1.0, 8)]
    assert reached_at(series, 2) == 0.5
    assert reached_at(series, 8) == 1.0
    assert reached_at(series, 9) is None


def test_the_p50_recovers_at_the_first_window_from_which_it_stays_under() -> None:
    samples = [
        (0.1, 2.0),
        (0.2, 2.0),  # window 0: p50 2.0
        (0.6, 0.3),  # window 1: p50 0.3, but window 2 rises again
        (1.1, 1.5),
        (1.2, 1.5),  # window 2: p50 1.5
        (1.6, 0.2),
        (1.7, 0.9),
        (1.8, 0.3),  # window 3: p50 0.3
        (2.7, 0.4),  # window 5 (4 is empty): p50 0.4
    ]
    assert recovered_at(samples, threshold=1.0, window=0.5) == 1.5


def test_a_p50_that_never_rose_has_recovered_at_once_and_one_still_high_never() -> None:
    fast = [(0.1, 0.2), (0.7, 0.3)]
    assert recovered_at(fast, threshold=1.0, window=0.5) == 0.0
    slow = [(0.1, 0.2), (0.7, 3.0)]
    assert recovered_at(slow, threshold=1.0, window=0.5) is None
    assert recovered_at([], threshold=1.0, window=0.5) is None


def test_a_sample_sent_just_before_the_burst_counts_in_its_first_window() -> None:
    assert recovered_at([(-0.01, 0.2), (0.2, 0.3)], threshold=1.0, window=0.5) == 0.0
