"""drf: dominant resource fairness between users inside a queue, then between their jobs."""

from __future__ import annotations

from collections import Counter

from tests.builders import bound, config, cycle, make_job, make_node, make_nodes, make_queue

DRF = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "binpack"])


def test_the_user_with_the_smaller_dominant_share_goes_first() -> None:
    running = make_job("alice-old", user="alice", gpus=6, running_on=["n0"])
    jobs = [
        make_job("alice-new", user="alice", gpus=2, created=1),
        make_job("bob-new", user="bob", gpus=2, created=2),  # submitted later
    ]

    decisions = cycle(make_nodes(1), [running, *jobs], DRF)

    assert bound(decisions, "bob-new") == ["n0"]
    assert bound(decisions, "alice-new") == []


def test_users_alternate_so_each_gets_half_of_a_contended_cluster() -> None:
    jobs = [make_job(f"alice{i}", user="alice", gpus=1, created=i) for i in range(8)]
    jobs += [make_job(f"bob{i}", user="bob", gpus=1, created=100 + i) for i in range(8)]

    decisions = cycle(make_nodes(1), jobs, DRF)  # 8 GPUs for 16 jobs

    per_user = Counter(b.job.rstrip("0123456789") for b in decisions.binds)
    assert per_user == {"alice": 4, "bob": 4}


def test_dominant_share_counts_the_scarcest_resource_not_just_gpus() -> None:
    # alice holds most of the node's CPU (dominant), bob holds more GPUs
    nodes = [make_node("n0", cpu=16, gpus=8)]
    running = [
        make_job("alice-old", user="alice", gpus=1, cpu=12, running_on=["n0"]),  # cpu 75%
        make_job("bob-old", user="bob", gpus=4, cpu=1, running_on=["n0"]),  # gpu 50%
    ]
    jobs = [
        make_job("alice-new", user="alice", gpus=1, cpu=1, created=1),
        make_job("bob-new", user="bob", gpus=1, cpu=1, created=2),
    ]
    tight = [make_node("n0", cpu=14, gpus=8)]  # room for only one more 1-CPU task

    assert bound(cycle(nodes, [*running, *jobs], DRF), "bob-new") == ["n0"]
    decisions = cycle(tight, [*running, *jobs], DRF)
    assert bound(decisions, "bob-new") == ["n0"] and bound(decisions, "alice-new") == []


def test_within_one_user_the_job_with_the_smaller_share_goes_first() -> None:
    # two elastic jobs of alice, both running; room for one more 2-GPU task
    jobs = [
        make_job("wide", user="alice", gpus=2, replicas=3, min_available=1, running_on=["n0"] * 2),
        make_job("thin", user="alice", gpus=2, replicas=3, min_available=1, running_on=["n0"]),
    ]

    decisions = cycle(make_nodes(1), jobs, DRF)

    assert bound(decisions, "thin") == ["n0"] and bound(decisions, "wide") == []


def test_drf_is_per_queue_a_user_in_another_queue_does_not_count() -> None:
    queues = [make_queue("a"), make_queue("b")]
    # alice holds 7 of 8 GPUs through queue b; one GPU is left
    running = make_job("alice-b", queue="b", user="alice", gpus=7, running_on=["n0"])
    jobs = [
        make_job("bob-a", queue="a", user="bob", gpus=1, created=1),
        make_job("alice-a", queue="a", user="alice", gpus=1, created=2),
    ]

    decisions = cycle(make_nodes(1), [running, *jobs], DRF, queues=queues)

    # inside queue a both users hold nothing: the tie goes by user name, not by queue b
    assert bound(decisions, "alice-a") == ["n0"] and bound(decisions, "bob-a") == []
