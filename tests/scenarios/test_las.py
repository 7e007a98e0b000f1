"""las: Tiresias' 2D-LAS orders by attained GPU-seconds and lets the least served preempt.

Attained service is what ended runs banked plus each running task's GPUs times the time
since it started, so a running job climbs levels as the clock moves, with no driver help.
"""

from __future__ import annotations

from dataclasses import replace

from phalanx.domain.job import TaskPhase
from phalanx.engine.state import ClusterState
from tests.builders import config, cycle, evicted, make_job, make_nodes, make_queue

LAS = config(
    ["allocate", "preempt"],
    ["gang", ("las", {"thresholds": [3200]})],
    ["predicates", "capacity", "binpack"],
)


def test_a_new_job_preempts_one_that_crossed_the_threshold_while_running() -> None:
    # 8 GPUs since t=0: 3,200 GPU-s are reached at t=400
    veteran = make_job("veteran", gpus=8, running_on=["n0"], started=0.0)
    newcomer = make_job("newcomer", gpus=8, created=1)

    early = cycle(make_nodes(1), [veteran, newcomer], LAS, now=399)
    late = cycle(make_nodes(1), [veteran, newcomer], LAS, now=401)

    assert early.evictions == ()
    assert evicted(late, "veteran") == ["veteran-worker-0"]
    assert {e.by for e in late.evictions} == {"newcomer"}


def test_jobs_in_the_same_level_never_preempt_each_other() -> None:
    veteran = make_job("veteran", gpus=8, running_on=["n0"], started=0.0)
    newcomer = replace(make_job("newcomer", gpus=8, created=1), attained_service=5000.0)

    decisions = cycle(make_nodes(1), [veteran, newcomer], LAS, now=401)

    assert decisions.evictions == ()


def test_service_of_ended_runs_is_banked_when_a_task_leaves_its_node() -> None:
    state = ClusterState(make_nodes(1), [make_queue()])
    info = state.add_job(make_job("j", gpus=4))
    assert info is not None
    task = info.tasks[0]
    state.set_task(task, TaskPhase.RUNNING, "n0", start_time=100.0)
    assert info.service(now=150.0) == 200.0  # 4 GPUs x 50 s, nothing banked yet

    state.set_task(task, TaskPhase.PENDING, now=300.0)

    assert info.attained_service == 800.0
    assert info.service(now=1000.0) == 800.0  # waiting adds nothing


def test_least_served_level_goes_first_then_arrival_order() -> None:
    served = replace(make_job("served", gpus=8, created=0), attained_service=4000.0)
    fresh = make_job("fresh", gpus=8, created=5)

    decisions = cycle(make_nodes(1), [served, fresh], LAS, now=10)

    assert [b.job for b in decisions.binds] == ["fresh"]
