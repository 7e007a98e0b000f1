"""Places in line: every job left pending is numbered within its leaf queue in the order
allocate serves jobs (priority, then arrival, then name), and a placed job has none."""

from __future__ import annotations

from phalanx.domain.job import JobPhase, Role
from phalanx.engine import Decisions, default_config
from phalanx.engine.decisions import ReasonCode
from tests.builders import config, cycle, make_job, make_node, make_queue, res

PLACE = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "capacity", "binpack"])


def _places(decisions: Decisions) -> dict[str, int | None]:
    return {item.job: item.position for item in decisions.unschedulable}


def test_places_follow_priority_then_arrival_and_a_placed_job_has_none() -> None:
    nodes = [make_node("n0", gpus=8), make_node("n1", gpus=4)]
    jobs = [
        make_job("busy", gpus=8, running_on=["n0"]),  # fills n0: the 8-GPU jobs wait
        make_job("low", gpus=8, created=1),
        make_job("high", gpus=8, created=2, priority=10),
        make_job("small", gpus=4, created=3),  # fits n1: placed, no place in line
        make_job("later", gpus=8, created=4),
    ]

    decisions = cycle(nodes, jobs, PLACE)

    assert [b.job for b in decisions.binds] == ["small"]
    assert _places(decisions) == {"high": 1, "low": 2, "later": 3}


def test_each_leaf_queue_numbers_its_own_line() -> None:
    queues = [make_queue("a"), make_queue("b")]
    jobs = [
        make_job("busy", queue="a", gpus=8, running_on=["n0"]),
        make_job("a1", queue="a", gpus=8, created=1),
        make_job("b1", queue="b", gpus=8, created=2),
        make_job("a2", queue="a", gpus=8, created=3),
        make_job("b2", queue="b", gpus=8, created=4, priority=5),
    ]

    decisions = cycle([make_node("n0", gpus=8)], jobs, PLACE, queues=queues)

    assert _places(decisions) == {"a1": 1, "a2": 2, "b2": 1, "b1": 2}


def test_equal_jobs_arriving_together_are_numbered_by_name_the_same_every_time() -> None:
    jobs = [make_job("busy", gpus=8, running_on=["n0"])] + [
        make_job(name, gpus=8, created=1) for name in ("c", "a", "b")
    ]

    first = cycle([make_node("n0", gpus=8)], jobs, PLACE)
    again = cycle([make_node("n0", gpus=8)], list(reversed(jobs)), PLACE)

    assert _places(first) == {"a": 1, "b": 2, "c": 3}
    assert first == again


def test_a_job_refused_as_written_has_no_place() -> None:
    queues = [make_queue("a")]
    jobs = [
        make_job("busy", queue="a", gpus=8, running_on=["n0"]),
        make_job("nowhere", queue="missing", gpus=1, created=1),  # an orphan
        make_job("waits", queue="a", gpus=8, created=2),
    ]

    decisions = cycle([make_node("n0", gpus=8)], jobs, PLACE, queues=queues)

    reason = decisions.reason_for("nowhere")
    assert reason is not None and reason.code is ReasonCode.INVALID
    assert _places(decisions) == {"nowhere": None, "waits": 1}


def test_jobs_not_admitted_yet_have_places_too() -> None:
    gang = Role(name="w", replicas=2, resources=res(cpu=1, memory_gib=1, gpu=8))
    jobs = [
        make_job("busy", gpus=8, running_on=["n0"]),
        make_job("pair", roles=[gang], created=1, phase=JobPhase.PENDING),
        make_job("one", gpus=8, created=2, phase=JobPhase.PENDING),
    ]

    decisions = cycle([make_node("n0", gpus=8)], jobs, default_config())

    assert {item.reason.code for item in decisions.unschedulable} == {ReasonCode.NOT_ADMITTED}
    assert _places(decisions) == {"pair": 1, "one": 2}
