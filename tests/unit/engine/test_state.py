"""ClusterState: incremental updates and reverted sessions agree with rebuilding from scratch."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, JobPhase, Task, TaskPhase
from phalanx.domain.resources import Resources
from phalanx.engine import Snapshot, default_config, run_cycle
from phalanx.engine.state import ClusterState
from tests.builders import make_job, make_nodes, make_queue, res

QUEUES = [
    make_queue("a", deserved=res(32, 128, 8)),
    make_queue("b", deserved=res(32, 128, 8)),
]
NODES = make_nodes(2)


def _arrays(snapshot: Snapshot) -> list[np.ndarray]:
    return [
        snapshot.used,
        snapshot.releasing,
        snapshot.pipelined,
        snapshot.task_count,
        *(q.allocated for q in snapshot.queues.values()),
        *(q.inqueue for q in snapshot.queues.values()),
    ]


def _jobs() -> list[Job]:
    return [
        make_job("run", queue="a", gpus=4, replicas=2, running_on=["n0", "n1"], created=0),
        make_job("gang", queue="b", gpus=4, replicas=2, created=1, phase=JobPhase.PENDING),
        make_job("small", queue="a", gpus=1, replicas=3, created=2, phase=JobPhase.PENDING),
        make_job("nowhere", queue="missing", created=3),
    ]


def test_reverted_cycles_match_a_fresh_build_and_leave_no_trace() -> None:
    state = ClusterState(NODES, QUEUES)
    for job in _jobs():
        state.add_job(job)
    before = [a.copy() for a in _arrays(state.snapshot)]
    incremental = state.cycle(default_config(), now=10.0)
    assert all(np.array_equal(x, y) for x, y in zip(before, _arrays(state.snapshot), strict=True))
    fresh = run_cycle(
        Snapshot.build(nodes=NODES, queues=QUEUES, jobs=_jobs()), default_config(), now=10.0
    )
    assert incremental == fresh
    assert incremental.binds and incremental.reason_for("nowhere") is not None
    again = state.cycle(default_config(), now=10.0)
    assert again == incremental


def test_applying_decisions_equals_building_the_resulting_jobs() -> None:
    state = ClusterState(NODES, QUEUES)
    jobs = {job.name: job for job in _jobs()}
    for job in jobs.values():
        state.add_job(job)
    decisions = state.cycle(default_config(), now=5.0)
    for admit in decisions.admitted:
        state.set_phase(admit.job, JobPhase.QUEUED)
        jobs[admit.job] = replace(jobs[admit.job], phase=JobPhase.QUEUED)
    for bind in decisions.binds:
        info = state.job(bind.job)
        task = next(t for t in info.tasks if t.name == bind.task)
        state.set_task(task, TaskPhase.RUNNING, bind.node, start_time=5.0)
        job = jobs[bind.job]
        tasks = [
            Task(
                role=t.role, index=t.index, phase=TaskPhase.RUNNING, node=bind.node, start_time=5.0
            )
            if t.name(job.name) == bind.task
            else t
            for t in job.all_tasks()
        ]
        jobs[bind.job] = replace(job, tasks=tuple(tasks), phase=JobPhase.RUNNING)
    rebuilt = Snapshot.build(nodes=NODES, queues=QUEUES, jobs=list(jobs.values()))
    assert all(
        np.array_equal(x, y) for x, y in zip(_arrays(rebuilt), _arrays(state.snapshot), strict=True)
    )
    assert state.cycle(default_config(), now=6.0) == run_cycle(rebuilt, default_config(), now=6.0)


def test_removing_a_job_gives_back_what_it_held() -> None:
    state = ClusterState(NODES, QUEUES)
    state.add_job(_jobs()[0])
    assert state.snapshot.used.sum() > 0 and len(state.snapshot.queues["a"].evictable) == 2
    state.remove_job("run")
    assert state.snapshot.used.sum() == 0 and "run" not in state.snapshot.jobs
    assert not state.snapshot.queues["a"].allocated.any()
    assert not state.snapshot.queues["a"].evictable


def test_unknown_resources_and_duplicates_are_refused() -> None:
    state = ClusterState(NODES, QUEUES)
    odd = make_job("odd", queue="a")
    odd = replace(odd, roles=(replace(odd.roles[0], resources=Resources.of({"fpga": 1})),))
    assert state.add_job(odd) is None
    reason = state.cycle(default_config(), now=0.0).reason_for("odd")
    assert reason is not None and "fpga" in reason.message
    state.add_job(make_job("x", queue="a"))
    with pytest.raises(InvalidInput, match="already tracked"):
        state.add_job(make_job("x", queue="a"))


def test_a_repaired_node_gives_the_cluster_its_capacity_back() -> None:
    state = ClusterState(NODES, [make_queue()])  # 2 nodes x 8 GPUs
    state.snapshot.set_schedulable(1, False)  # n1 fails
    state.add_job(make_job("wide", gpus=8, replicas=2, phase=JobPhase.PENDING))

    down = state.cycle(default_config(), now=0)
    state.snapshot.set_schedulable(1, True)  # and is repaired
    up = state.cycle(default_config(), now=1)

    assert down.admitted == () and down.binds == ()
    assert [a.job for a in up.admitted] == ["wide"]
    assert sorted(b.node for b in up.binds) == ["n0", "n1"]
    assert state.snapshot.total[list(state.snapshot.dims).index("gpu")] == 16_000  # milli-GPU


def test_changed_nodes_names_exactly_the_nodes_a_change_touched() -> None:
    state = ClusterState(make_nodes(3), QUEUES)
    snapshot = state.snapshot
    state.add_job(make_job("run", queue="a", gpus=1, running_on=["n1"]))
    assert snapshot.changed_nodes(-1).tolist() == [0, 1, 2]  # nothing seen yet: every node
    seen = snapshot.changes
    assert snapshot.changed_nodes(seen).size == 0
    task = state.job("run").tasks[0]
    state.set_task(task, TaskPhase.RUNNING, "n2", start_time=1.0)  # moved from n1 to n2
    assert snapshot.changed_nodes(seen).tolist() == [1, 2]
    seen = snapshot.changes
    state.cycle(default_config(), now=2.0)  # a reverted session changes and restores
    state.remove_job("run")
    assert snapshot.changed_nodes(seen).tolist() == [2]
