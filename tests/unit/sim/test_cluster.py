"""SimCluster: progress while the gang runs, checkpoints on eviction, failing runs."""

from __future__ import annotations

from phalanx.domain.job import Job, Role
from phalanx.domain.resources import Resources
from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import TaskEventKind
from phalanx.sim.cluster import FAILED_CODE, SimCluster
from phalanx.sim.workload import WorkloadJob


def _job(
    name: str = "j",
    *,
    replicas: int = 2,
    duration: float = 100.0,
    checkpoint: float | None = None,
    fail_after: tuple[float, ...] = (),
    restart_delay: float = 0.0,
) -> WorkloadJob:
    role = Role(name="w", replicas=replicas, resources=Resources.of({"gpu": 1}))
    return WorkloadJob(
        job=Job(name=name, queue="q", roles=(role,)),
        duration=duration,
        checkpoint_interval=checkpoint,
        fail_after=fail_after,
        restart_delay=restart_delay,
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


def test_each_run_spends_its_restart_delay_before_it_progresses() -> None:
    cluster = SimCluster({"j": _job(replicas=1, checkpoint=1.0, restart_delay=30.0)})
    cluster.start([_bind("j", 0)], now=0.0)
    cluster.poll(now=0.0)
    assert cluster.next_event_time() == 130.0  # 30 s starting, then 100 s of work
    cluster.stop([_evict("j", 0)], now=20.0, grace=0.0)  # still starting: no work done
    cluster.poll(now=20.0)
    cluster.start([_bind("j", 0)], now=50.0)
    cluster.poll(now=50.0)
    assert cluster.next_event_time() == 180.0  # the delay again, all 100 s of work left
    cluster.stop([_evict("j", 0)], now=120.5, grace=0.0)  # 40.5 s of work, 40 kept
    cluster.poll(now=120.5)
    cluster.start([_bind("j", 0)], now=200.0)
    cluster.poll(now=200.0)
    assert cluster.next_event_time() == 290.0  # 200 + 30 + (100 - 40)


def test_a_failing_run_fails_its_first_task_and_the_next_run_completes() -> None:
    cluster = SimCluster({"j": _job(replicas=2, duration=100.0, fail_after=(30.0,))})
    cluster.start([_bind("j", 0), _bind("j", 1)], now=0.0)
    cluster.poll(now=0.0)
    assert cluster.next_event_time() == 30.0
    ends = cluster.poll(now=30.0)
    assert [(e.task, e.exit_code, e.stopped) for e in ends] == [("j-w-0", FAILED_CODE, False)]
    # the other task runs on, making no progress, until the scheduler stops it
    assert cluster.next_event_time() is None
    cluster.stop([_evict("j", 1)], now=40.0, grace=0.0)
    assert [(e.task, e.stopped) for e in cluster.poll(now=40.0)] == [("j-w-1", True)]
    cluster.start([_bind("j", 0), _bind("j", 1)], now=60.0)
    cluster.poll(now=60.0)
    assert cluster.next_event_time() == 160.0  # no checkpoint: the whole run again
    assert {e.exit_code for e in cluster.poll(now=160.0)} == {0}


def test_a_lost_node_stops_its_tasks_at_once() -> None:
    cluster = SimCluster({"j": _job(replicas=1)})
    cluster.start([_bind("j", 0, node="n3")], now=0.0)
    cluster.poll(now=0.0)
    cluster.lose_node("n3", now=20.0)
    assert [e.kind for e in cluster.poll(now=20.0)] == [TaskEventKind.LOST]
    assert cluster.next_event_time() is None
