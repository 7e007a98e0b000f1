"""Unschedulable is data: every job left pending carries a reason a person can act on.

Each reason names what is short (the resource), which queue limit binds, the best
candidate node and its shortfall, or the fix.
"""

from __future__ import annotations

from phalanx.domain.job import JobPhase, NodeSelectorRequirement, SelectorOperator
from phalanx.domain.resources import Resources
from phalanx.engine import ReasonCode, default_config
from tests.builders import GiB, config, cycle, make_job, make_node, make_nodes, make_queue, res

PLACE = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "capacity", "binpack"])


def test_short_of_gpus_names_the_resource_the_closest_node_and_its_shortfall() -> None:
    running = [
        make_job("r0", gpus=5, running_on=["n0"]),
        make_job("r1", gpus=6, running_on=["n1"]),
    ]

    decisions = cycle(make_nodes(2), [*running, make_job("j", gpus=4)], PLACE)

    reason = decisions.reason_for("j")
    assert reason is not None and reason.code is ReasonCode.INSUFFICIENT
    assert reason.resource == "gpu"
    assert reason.node == "n0" and reason.shortfall == Resources.of({"gpu": 1})
    assert "0/2 nodes have room" in reason.message and "closest is n0, which lacks 1 GPU" in (
        reason.message
    )


def test_short_of_memory_says_memory_in_people_units() -> None:
    running = [make_job("r0", gpus=1, memory_gib=40, running_on=["n0"])]

    decisions = cycle(make_nodes(1), [*running, make_job("j", gpus=1, memory_gib=32)], PLACE)

    reason = decisions.reason_for("j")
    assert reason is not None and reason.resource == "memory"
    assert reason.shortfall == Resources.of({"memory": 8 * GiB})
    assert "lacks 8Gi memory" in reason.message


def test_a_queue_limit_names_the_queue_path_and_the_binding_capability() -> None:
    queues = [
        make_queue("team", capability=res(gpu=8)),
        make_queue("nlp", parent="team"),
    ]
    jobs = [
        make_job("running", queue="nlp", gpus=8, running_on=["n0"]),
        make_job("j", queue="nlp", gpus=1),
    ]

    decisions = cycle(make_nodes(2), jobs, PLACE, queues=queues)

    reason = decisions.reason_for("j")
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert reason.queue == "nlp"
    assert "queue team is at its capability of 8 GPUs" in reason.message
    assert "fix:" in reason.message


def test_a_leaf_queue_limit_shows_the_path_from_the_root() -> None:
    queues = [make_queue("team"), make_queue("nlp", parent="team", capability=res(gpu=4))]
    jobs = [make_job("j", queue="nlp", gpus=8)]

    decisions = cycle(make_nodes(1), jobs, PLACE, queues=queues)

    reason = decisions.reason_for("j")
    assert reason is not None and "queue team/nlp has a capability of 4 GPUs" in reason.message


def test_a_gang_that_does_not_fit_says_how_many_of_its_tasks_fit() -> None:
    running = make_job("r0", gpus=4, running_on=["n1"])
    job = make_job("gang", gpus=8, replicas=2)

    decisions = cycle(make_nodes(2), [running, job], PLACE)

    reason = decisions.reason_for("gang")
    assert reason is not None and reason.code is ReasonCode.GANG
    assert "gang needs 2 tasks together but only 1 fit" in reason.message
    assert reason.node == "n1" and reason.shortfall == Resources.of({"gpu": 4})


def test_a_job_for_a_missing_queue_is_invalid_with_the_fix() -> None:
    decisions = cycle(make_nodes(1), [make_job("lost", queue="nope")], PLACE)

    reason = decisions.reason_for("lost")
    assert reason is not None and reason.code is ReasonCode.INVALID
    assert "'nope' does not exist" in reason.message and "fix:" in reason.message


def test_a_job_not_admitted_names_the_short_resource() -> None:
    cfg = config(["enqueue", "allocate"], ["priority", "gang"], ["drf", "predicates", "capacity"])
    queues = [make_queue("q", deserved=res(gpu=1))]
    running = make_job("r", queue="q", gpus=8, running_on=["n0"])
    job = make_job("j", queue="q", gpus=4, phase=JobPhase.PENDING)

    decisions = cycle(make_nodes(1), [running, job], cfg, queues=queues)

    reason = decisions.reason_for("j")
    assert reason is not None and reason.code is ReasonCode.NOT_ADMITTED
    assert reason.resource == "gpu" and "needs 4 GPUs" in reason.message


def test_every_pending_job_of_a_busy_cluster_has_a_specific_reason() -> None:
    queues = [
        make_queue("prod", capability=res(gpu=16)),
        make_queue("research", deserved=res(gpu=8)),
        make_queue("small", capability=res(gpu=2)),
    ]
    nodes = [*make_nodes(3), make_node("a100-0", labels={"gpu": "A100"})]
    affinity = [NodeSelectorRequirement(key="gpu", operator=SelectorOperator.IN, values=("H100",))]
    jobs = [
        make_job("prod-run", queue="prod", gpus=8, replicas=2, running_on=["n0", "n1"]),
        make_job("prod-more", queue="prod", gpus=4, created=1),  # capability
        make_job("research-big", queue="research", gpus=8, replicas=3, created=2),  # gang
        make_job("research-h100", queue="research", gpus=1, affinity=affinity, created=3),
        make_job("small-big", queue="small", gpus=4, created=4, phase=JobPhase.PENDING),
        make_job("broken", queue="research", gpus=1, replicas=1, min_available=2, created=5),
        make_job("orphan", queue="ghost", gpus=1, created=6),
    ]

    decisions = cycle(nodes, jobs, default_config(), queues=queues, now=10)

    placed = {b.job for b in decisions.binds} | {p.job for p in decisions.pipelined}
    pending = {j.name for j in jobs if j.name not in placed and j.name != "prod-run"}
    reasons = {u.job: u.reason for u in decisions.unschedulable}
    assert set(reasons) == pending
    expected = {
        "prod-more": ReasonCode.QUEUE_LIMIT,
        "research-big": ReasonCode.GANG,
        "research-h100": ReasonCode.NO_MATCHING_NODE,
        "small-big": ReasonCode.QUEUE_LIMIT,
        "broken": ReasonCode.INVALID,
        "orphan": ReasonCode.INVALID,
    }
    assert {name: reasons[name].code for name in expected} == expected
    for reason in reasons.values():
        assert reason.message != "not placed in this cycle"
        assert "fix" in reason.message or reason.resource or reason.node


def test_a_gang_none_of_whose_tasks_fits_reports_gang_unsatisfied() -> None:
    jobs = [
        make_job("gang-a", gpus=4, replicas=4, created=1),
        make_job("gang-b", gpus=4, replicas=4, created=2),
    ]

    decisions = cycle(make_nodes(2), jobs, PLACE)

    reason = decisions.reason_for("gang-b")
    assert reason is not None and reason.code is ReasonCode.GANG


def test_a_partially_placed_job_without_the_gang_plugin_says_what_is_short() -> None:
    no_gang = config(["allocate"], ["priority"], ["drf", "predicates", "binpack"])
    job = make_job("half", gpus=8, replicas=2)

    decisions = cycle(make_nodes(1), [job], no_gang)

    reason = decisions.reason_for("half")
    assert reason is not None and reason.resource == "gpu"


ADMIT = config(["enqueue", "allocate"], ["priority", "gang"], ["drf", "predicates", "proportion"])


def test_a_job_over_its_queue_capability_is_told_it_never_fits_and_the_fix() -> None:
    queues = [make_queue("q", capability=res(gpu=16))]
    job = make_job("big", queue="q", gpus=8, replicas=3, phase=JobPhase.PENDING)

    for cfg in (ADMIT, PLACE):  # refused at admission, and at allocation without enqueue
        pending = job if cfg is ADMIT else make_job("big", queue="q", gpus=8, replicas=3)
        reason = cycle(make_nodes(4), [pending], cfg, queues=queues).reason_for("big")

        assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
        assert "never fits" in reason.message and "or wait" not in reason.message
        assert "needs 24 GPUs but queue q has a capability of 16 GPUs" in reason.message
        assert "fix: submit a smaller job" in reason.message
        assert "raise the queue's capability" in reason.message


def test_a_job_that_fits_its_capability_once_work_ends_is_not_told_never() -> None:
    queues = [make_queue("q", capability=res(gpu=16))]
    jobs = [
        make_job("r", queue="q", gpus=8, running_on=["n0"]),
        make_job("j", queue="q", gpus=8, replicas=2, phase=JobPhase.PENDING),
    ]

    reason = cycle(make_nodes(4), jobs, ADMIT, queues=queues).reason_for("j")

    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert "never fits" not in reason.message
    assert "(8 GPUs held or admitted); fix: wait for its jobs to finish" in reason.message


def test_cordoned_nodes_are_counted_with_the_gpus_they_take_away() -> None:
    nodes = [
        make_node("n0"),
        make_node("n1", schedulable=False),
        make_node("n2", schedulable=False),
    ]
    jobs = [
        make_job("r", gpus=8, running_on=["n0"]),
        make_job("j", gpus=8, phase=JobPhase.PENDING),
    ]

    reason = cycle(nodes, jobs, ADMIT).reason_for("j")

    assert reason is not None and reason.code is ReasonCode.NOT_ADMITTED
    assert "committed" not in reason.message
    assert "2 of 3 nodes are unschedulable (cordoned, draining or not ready)" in reason.message
    assert "holding 16 GPUs" in reason.message and "uncordon" in reason.message


def test_cordoned_nodes_are_named_when_a_queued_job_finds_no_room() -> None:
    nodes = [make_node("n0"), make_node("n1", schedulable=False)]
    busy = [make_job("r", gpus=6, running_on=["n0"]), make_job("j", gpus=4)]

    reason = cycle(nodes, busy, PLACE).reason_for("j")
    assert reason is not None and reason.code is ReasonCode.INSUFFICIENT
    assert "1 of 2 nodes is unschedulable (cordoned, draining or not ready), holding 8 GPUs" in (
        reason.message
    )

    every = [make_node("n0", schedulable=False), make_node("n1", schedulable=False)]
    reason = cycle(every, [make_job("j", gpus=4)], PLACE).reason_for("j")
    assert reason is not None and reason.code is ReasonCode.NO_MATCHING_NODE
    assert "2 of 2 nodes are unschedulable" in reason.message and "uncordon" in reason.message


def test_not_admitted_speaks_the_users_units_and_names_the_roomiest_node() -> None:
    jobs = [
        make_job("r0", gpus=4, running_on=["n0"]),
        make_job("r1", gpus=8, running_on=["n1"]),
        make_job("r2", gpus=6, running_on=["n2"]),
        make_job("j", gpus=8, cpu=0.5, memory_gib=16, replicas=2, phase=JobPhase.PENDING),
    ]

    reason = cycle(make_nodes(3), jobs, ADMIT).reason_for("j")

    assert reason is not None and reason.code is ReasonCode.NOT_ADMITTED
    message = reason.message
    assert "needs 16 GPUs, 1 CPU and 32Gi memory for its minimum of 2 tasks" in message
    assert "the cluster has 6 GPUs free (of 24 GPUs)" in message
    assert "the most free on one node is 4 GPUs (n0)" in message
    assert "queue default deserves 24 GPUs and holds 18 GPUs, so reclaim cannot" in message
    assert "gpu=" not in message and "short of" not in message


def test_reasons_write_cpu_as_the_user_did() -> None:
    jobs = [
        make_job("r", gpus=8, running_on=["n0"]),
        make_job("j", gpus=8, cpu=0.5, phase=JobPhase.PENDING),
    ]

    reason = cycle(make_nodes(1), jobs, ADMIT).reason_for("j")

    assert reason is not None and "needs 8 GPUs, 500m CPU and 1Gi memory" in reason.message


def test_work_admitted_but_not_started_is_named_as_promised() -> None:
    jobs = [
        make_job("r", gpus=8, running_on=["n0"]),
        make_job("a", gpus=8, phase=JobPhase.PENDING, created=1),
        make_job("b", gpus=8, phase=JobPhase.PENDING, created=2),
    ]

    decisions = cycle(make_nodes(2), jobs, ADMIT)

    reason = decisions.reason_for("b")
    assert "a" in [a.job for a in decisions.admitted] and reason is not None
    assert "the cluster has 8 GPUs free (of 16 GPUs)" in reason.message
    assert "8 GPUs promised to admitted jobs not yet started" in reason.message
