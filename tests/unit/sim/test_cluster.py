"""SimCluster: progress while the gang runs, checkpoints on eviction, walltime kills."""

from __future__ import annotations

from phalanx.domain.job import Job, Role
from phalanx.domain.resources import Resources
from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import TaskEventKind
from phalanx.sim.cluster import KILLED, SimCluster
from phalanx.sim.workload import WorkloadJob


def _job(
    name: str = "j",
    *,
    replicas: int = 2,
    duration: float = 100.0,
    checkpoint: float | None = None,
    walltime: float | None = None,
) -> WorkloadJob:
    role = Role(name="w", replicas=replicas, resources=Resources.of({"gpu": 1}))
    return WorkloadJob(
        job=Job(name=name, queue="q", roles=(role,), walltime=walltime),
        duration=duration,
        checkpoint_interval=checkpoint,
    )


def _bind(job: str, index: int, node: str = "n0") -> Bind:
    return Bind(job=job, task=f"{job}-w-{index}", role="w", index=index, node=node)


def _evict(job: str, index: int) -> Evict:
    return Evict(
        job=job, task=f"{job}-w-{index}", node="n0", action="preempt", by="x", reason="test"
    )


def test_a_gang_progresses_only_when_complete_and_ends_with_code_zero() -> None:
    cluster = SimCluster({"j": _job()})
    cluster.start([_bind("j", 0)], now=0.0)
    assert cluster.next_event_time() == 0.0  # the start event only: half a gang makes no progress
    assert [e.kind for e in cluster.poll(now=0.0)] == [TaskEventKind.STARTED]
    cluster.start([_bind("j", 1)], now=10.0)
    cluster.poll(now=10.0)
    assert cluster.next_event_time() == 110.0
    ends = cluster.poll(now=110.0)
    assert [(e.kind, e.exit_code, e.stopped) for e in ends] == [
        (TaskEventKind.EXITED, 0, False)
    ] * 2


def test_eviction_loses_work_since_the_last_checkpoint() -> None:
    cluster = SimCluster({"j": _job(checkpoint=30.0)})
    cluster.start([_bind("j", 0), _bind("j", 1)], now=0.0)
    cluster.stop([_evict("j", 0)], now=70.0, grace=5.0)  # 70 s run, checkpoint at 60 s
    stopped = cluster.poll(now=75.0)
    assert [(e.kind, e.stopped, e.time) for e in stopped if e.kind is TaskEventKind.EXITED] == [
        (TaskEventKind.EXITED, True, 75.0)
    ]
    cluster.start([_bind("j", 0)], now=200.0)  # task 1 never stopped: the gang is whole again
    cluster.poll(now=200.0)
    assert cluster.next_event_time() == 240.0  # 100 - 60 kept = 40 s left


def test_without_checkpoints_an_evicted_job_restarts_from_zero() -> None:
    cluster = SimCluster({"j": _job(replicas=1)})
    cluster.start([_bind("j", 0)], now=0.0)
    cluster.stop([_evict("j", 0)], now=90.0, grace=0.0)
    cluster.poll(now=90.0)
    cluster.start([_bind("j", 0)], now=100.0)
    cluster.poll(now=100.0)
    assert cluster.next_event_time() == 200.0


def test_a_run_reaching_its_walltime_is_killed() -> None:
    cluster = SimCluster({"j": _job(replicas=1, walltime=50.0)})
    cluster.start([_bind("j", 0)], now=0.0)
    cluster.poll(now=0.0)
    ends = cluster.poll(now=50.0)
    assert [(e.exit_code, e.stopped) for e in ends] == [(KILLED, True)]


def test_a_lost_node_stops_its_tasks_at_once() -> None:
    cluster = SimCluster({"j": _job(replicas=1)})
    cluster.start([_bind("j", 0, node="n3")], now=0.0)
    cluster.poll(now=0.0)
    cluster.lose_node("n3", now=20.0)
    assert [e.kind for e in cluster.poll(now=20.0)] == [TaskEventKind.LOST]
    assert cluster.next_event_time() is None
