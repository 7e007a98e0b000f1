"""enqueue: admission (Pending -> Queued) by queue capability and the cluster's overcommit budget."""

from __future__ import annotations

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.queue import Queue
from phalanx.engine import ActionConfig, ReasonCode, SchedulerConfig
from tests.builders import config, cycle, make_job, make_nodes, make_queue, res
from tests.scenarios.world import World

TIER1 = ["priority", "gang"]
ENQUEUE = config(["enqueue"], TIER1, ["drf", "predicates", "capacity", "binpack"])
ENQUEUE_ALLOCATE = config(
    ["enqueue", "allocate"], TIER1, ["drf", "predicates", "capacity", "binpack"]
)


def _pending(prefix: str, count: int, *, queue: str = "default", gpus: float = 1) -> list[Job]:
    return [
        make_job(f"{prefix}{i}", queue=queue, gpus=gpus, cpu=0.1, created=i, phase=JobPhase.PENDING)
        for i in range(count)
    ]


def _capped(queue: str = "default", gpu: float = 100) -> list[Queue]:
    # a capability far above the cluster, and a deserved share of nothing: admission by budget only
    return [make_queue(queue, capability=res(gpu=gpu), deserved=res(gpu=0.001))]


def test_any_number_of_jobs_of_one_queue_are_admitted_in_one_cycle() -> None:
    decisions = cycle(make_nodes(2), _pending("j", 12), ENQUEUE, queues=[make_queue()])

    assert [a.job for a in decisions.admitted] == [f"j{i}" for i in range(12)]


def test_cluster_overcommit_factor_bounds_admitted_work_at_1_2_times_capacity() -> None:
    # 8 GPUs x 1.2 = 9.6: nine 1-GPU jobs fit the budget, the tenth does not
    decisions = cycle(make_nodes(1), _pending("j", 12), ENQUEUE, queues=_capped())

    assert len(decisions.admitted) == 9
    reason = decisions.reason_for("j9")
    assert reason is not None and reason.code is ReasonCode.NOT_ADMITTED
    assert reason.resource == "gpu" and "needs 1 GPU" in reason.message


def test_overcommit_factor_is_configurable() -> None:
    cfg = SchedulerConfig(
        actions=(ActionConfig(name="enqueue", args={"overcommitFactor": 2.0}),),
        tiers=ENQUEUE.tiers,
    )

    decisions = cycle(make_nodes(1), _pending("j", 20), cfg, queues=_capped())

    assert len(decisions.admitted) == 16


def test_admitted_but_unplaced_work_counts_against_the_budget_in_later_cycles() -> None:
    world = World(nodes=make_nodes(1), queues=_capped(), config=ENQUEUE)
    world.submit(*_pending("j", 20))

    first = world.step(0)
    second = world.step(1)

    assert len(first.admitted) == 9
    assert second.admitted == ()  # the nine admitted jobs still wait: nothing more fits


def test_running_work_uses_the_budget() -> None:
    running = [make_job(f"r{i}", gpus=1, cpu=0.1, running_on=["n0"]) for i in range(6)]

    decisions = cycle(make_nodes(1), [*running, *_pending("j", 6)], ENQUEUE, queues=_capped())

    assert len(decisions.admitted) == 3  # 9.6 - 6 running


def test_queue_capability_refuses_admission_with_the_limit_named() -> None:
    queues = [make_queue("small", capability=res(gpu=4))]
    jobs = [
        make_job("fits", queue="small", gpus=4, phase=JobPhase.PENDING, created=0),
        make_job("over", queue="small", gpus=1, phase=JobPhase.PENDING, created=1),
    ]

    decisions = cycle(make_nodes(2), jobs, ENQUEUE, queues=queues)

    assert [a.job for a in decisions.admitted] == ["fits"]
    reason = decisions.reason_for("over")
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert reason.queue == "small" and "capability of 4 GPUs" in reason.message


def test_parent_capability_refuses_admission_to_a_child() -> None:
    queues = [
        make_queue("team", capability=res(gpu=6)),
        make_queue("nlp", parent="team"),
        make_queue("cv", parent="team"),
    ]
    jobs = [
        make_job("n0", queue="nlp", gpus=4, phase=JobPhase.PENDING, created=0),
        make_job("c0", queue="cv", gpus=4, phase=JobPhase.PENDING, created=1),
    ]

    decisions = cycle(make_nodes(2), jobs, ENQUEUE, queues=queues)

    assert [a.job for a in decisions.admitted] == ["c0"]  # queues of equal share: by name
    reason = decisions.reason_for("n0")
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert reason.queue == "team" and "capability of 6 GPUs" in reason.message


def test_a_pending_job_is_not_placed_before_it_is_admitted() -> None:
    queues = [make_queue("q", capability=res(gpu=8))]
    jobs = [make_job("big", queue="q", gpus=8, replicas=2, phase=JobPhase.PENDING)]

    decisions = cycle(make_nodes(2), jobs, ENQUEUE_ALLOCATE, queues=queues)

    assert decisions.admitted == () and decisions.binds == ()
    assert decisions.reason_for("big") is not None


def test_admitted_jobs_are_placed_in_the_same_cycle() -> None:
    decisions = cycle(make_nodes(1), _pending("j", 3), ENQUEUE_ALLOCATE, queues=[make_queue()])

    assert [a.job for a in decisions.admitted] == ["j0", "j1", "j2"]
    assert sorted(b.job for b in decisions.binds) == ["j0", "j1", "j2"]
