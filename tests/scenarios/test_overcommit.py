"""overcommit: the seeds' over-issued queue.

Its jobs may be admitted and run beyond its quota; the work beyond quota (most recently
started first) is the first that reclaim takes back, before a queue that merely borrows.
"""

from __future__ import annotations

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.queue import Queue
from tests.builders import config, cycle, make_job, make_nodes, make_queue, res

TIER1 = ["priority", "gang", "overcommit"]
TIER2 = ["drf", "predicates", "capacity", "binpack"]
RECLAIM = config(["enqueue", "allocate", "reclaim"], TIER1, TIER2)


def _queues() -> list[Queue]:
    return [
        make_queue("oc", deserved=res(gpu=8), capability=res(gpu=8), overcommit=True),
        make_queue("borrow", deserved=res(gpu=8)),
        make_queue("rec", deserved=res(gpu=16)),
    ]


def _running(placement: dict[str, str]) -> list[Job]:
    """4-GPU jobs: name -> node; ``oc`` jobs started in name order (oc3 latest)."""
    return [
        make_job(
            name,
            queue="oc" if name.startswith("oc") else "borrow",
            gpus=4,
            running_on=[node],
            started=float(name[-1]),
        )
        for name, node in placement.items()
    ]


def test_an_overcommit_queue_runs_beyond_its_quota_and_a_plain_queue_does_not() -> None:
    queues = [
        make_queue("oc", capability=res(gpu=8), overcommit=True),
        make_queue("plain", capability=res(gpu=8)),
    ]
    jobs = [
        *(make_job(f"oc{i}", queue="oc", gpus=4, phase=JobPhase.PENDING) for i in range(4)),
        *(make_job(f"plain{i}", queue="plain", gpus=4, phase=JobPhase.PENDING) for i in range(4)),
    ]

    decisions = cycle(make_nodes(4), jobs, RECLAIM, queues=queues)  # 32 GPUs

    bound_jobs = sorted({b.job for b in decisions.binds})
    assert bound_jobs == ["oc0", "oc1", "oc2", "oc3", "plain0", "plain1"]


def test_the_overcommitted_tasks_are_reclaimed_before_a_borrowing_queue() -> None:
    # oc holds 16 (8 over its quota: oc2, oc3 started last); borrow holds 16 (8 over deserved)
    running = _running(
        {"oc2": "n0", "oc3": "n0", "oc0": "n1", "oc1": "n1", "bw0": "n2", "bw1": "n2"}
        | {"bw2": "n3", "bw3": "n3"}
    )
    reclaimer = make_job("r0", queue="rec", gpus=4, replicas=2, created=10)

    decisions = cycle(make_nodes(4), [*running, reclaimer], RECLAIM, queues=_queues(), now=20)

    assert sorted(e.job for e in decisions.evictions) == ["oc2", "oc3"]
    assert {p.node for p in decisions.pipelined} == {"n0"}


def test_on_one_node_the_overcommitted_task_goes_before_a_borrowing_queues_task() -> None:
    running = _running(
        {"bw0": "n0", "oc3": "n0", "oc0": "n1", "bw1": "n1", "oc1": "n2", "bw2": "n2"}
        | {"oc2": "n3", "bw3": "n3"}
    )
    reclaimer = make_job("r0", queue="rec", gpus=4, created=10)

    decisions = cycle(make_nodes(4), [*running, reclaimer], RECLAIM, queues=_queues(), now=20)

    assert [e.job for e in decisions.evictions] == ["oc3"]


def test_overcommitted_tasks_go_first_wherever_they_run() -> None:
    # every node holds one oc task and one borrow task; oc2 and oc3 are the excess
    running = _running(
        {"oc0": "n0", "bw0": "n0", "oc1": "n1", "bw1": "n1", "oc2": "n2", "bw2": "n2"}
        | {"oc3": "n3", "bw3": "n3"}
    )
    reclaimer = make_job("r0", queue="rec", gpus=4, replicas=2, created=10)

    decisions = cycle(make_nodes(4), [*running, reclaimer], RECLAIM, queues=_queues(), now=20)

    assert sorted(e.job for e in decisions.evictions) == ["oc2", "oc3"]
