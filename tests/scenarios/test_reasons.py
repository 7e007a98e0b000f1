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
    assert "0/2 nodes have room" in reason.message and "closest is n0, which lacks gpu=1" in (
        reason.message
    )


def test_short_of_memory_says_memory_in_people_units() -> None:
    running = [make_job("r0", gpus=1, memory_gib=40, running_on=["n0"])]

    decisions = cycle(make_nodes(1), [*running, make_job("j", gpus=1, memory_gib=32)], PLACE)

    reason = decisions.reason_for("j")
    assert reason is not None and reason.resource == "memory"
    assert reason.shortfall == Resources.of({"memory": 8 * GiB})
    assert "memory=8Gi" in reason.message


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
    assert "queue team at capability gpu=8" in reason.message
    assert "fix:" in reason.message


def test_a_leaf_queue_limit_shows_the_path_from_the_root() -> None:
    queues = [make_queue("team"), make_queue("nlp", parent="team", capability=res(gpu=4))]
    jobs = [make_job("j", queue="nlp", gpus=8)]

    decisions = cycle(make_nodes(1), jobs, PLACE, queues=queues)

    reason = decisions.reason_for("j")
    assert reason is not None and "queue team/nlp at capability gpu=4" in reason.message


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
    assert reason.resource == "gpu" and "gpu=" in reason.message


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
