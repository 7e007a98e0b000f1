"""priority: higher-priority jobs are placed first; queues with a higher priority go first."""

from __future__ import annotations

from tests.builders import bound, config, cycle, make_job, make_nodes, make_queue

PRIORITY = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "binpack"])


def test_the_higher_priority_job_gets_the_last_room_even_when_submitted_later() -> None:
    jobs = [
        make_job("early-low", gpus=8, priority=1, created=0),
        make_job("late-high", gpus=8, priority=100, created=50),
    ]

    decisions = cycle(make_nodes(1), jobs, PRIORITY)

    assert bound(decisions, "late-high") == ["n0"]
    assert bound(decisions, "early-low") == []


def test_equal_priority_goes_by_submission_time() -> None:
    jobs = [make_job("second", gpus=8, created=2), make_job("first", gpus=8, created=1)]

    decisions = cycle(make_nodes(1), jobs, PRIORITY)

    assert bound(decisions, "first") == ["n0"]


def test_priority_outranks_drf_fairness_between_users() -> None:
    running = make_job("alice-old", user="alice", gpus=6, running_on=["n0"])
    jobs = [
        make_job("bob-low", user="bob", gpus=2, priority=1, created=1),
        make_job("alice-high", user="alice", gpus=2, priority=9, created=2),
    ]

    decisions = cycle(make_nodes(1), [running, *jobs], PRIORITY)

    assert bound(decisions, "alice-high") == ["n0"]


def test_a_higher_priority_queue_is_served_first() -> None:
    queues = [make_queue("batch", priority=0), make_queue("prod", priority=10)]
    jobs = [
        make_job("batch0", queue="batch", gpus=8, created=0),
        make_job("prod0", queue="prod", gpus=8, created=5),
    ]

    decisions = cycle(make_nodes(1), jobs, PRIORITY, queues=queues)

    assert bound(decisions, "prod0") == ["n0"] and bound(decisions, "batch0") == []
