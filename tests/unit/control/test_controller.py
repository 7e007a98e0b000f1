"""The controller on a real SQLite store, with a fake executor and an injected clock.

Each test submits jobs as the API does (``store_jobs``), ticks the controller by hand
at clock times it chooses, reports executor events itself, and reads the job's stored
row: what a restarted server and ``phalanx get jobs`` would see. No test sleeps.
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from phalanx.control.controllers.adoption import CUT_SHORT, UNRECORDED
from phalanx.control.controllers.intents import Intent
from phalanx.control.store.models import JobRow, TaskRow
from phalanx.executors.base import TaskEventKind
from phalanx.executors.records import ProcessRecord
from tests.unit.control.plane import FakeExecutor, Plane


def _master_then_worker() -> list[dict[str, object]]:
    """Two roles; the worker starts once the master is Running (``dependsOn``)."""
    return [
        {"name": "master", "replicas": 1, "resources": {"gpu": 1}, "command": "true"},
        {
            "name": "worker",
            "replicas": 1,
            "resources": {"gpu": 1},
            "command": "true",
            "dependsOn": [{"role": "master", "phase": "Running"}],
        },
    ]


def _placed(plane: Plane, name: str) -> None:
    plane.submit(name)
    plane.tick()
    assert plane.job(name).phase == "Running"
    assert [b.task for b in plane.executor.started] == [f"{name}-w-0"]


# -- lost and unstartable tasks (these bricked a data dir: Bound -> Pending is illegal) -----


def test_a_bound_task_lost_with_its_node_fails_the_attempt_and_the_job_retries(
    plane: Plane,
) -> None:
    _placed(plane, "a")
    plane.report(TaskEventKind.LOST, "a-w-0")
    plane.tick()
    # The node failed, not the job: a retry is spent, and the gang is placed again at
    # once, in the same tick (no backoff).
    job = plane.job("a")
    assert (job.phase, job.attempts) == ("Running", 1)
    assert plane.events("a")[-5:] == ["TaskFailed", "Pending", "Queued", "Placed", "Running"]
    failed = plane.event_messages("a", "TaskFailed")[-1]
    assert "task a-w-0 was lost with its node n0; retry 1 of 3 at once" in failed
    assert len(plane.executor.started) == 2


def test_a_running_task_lost_with_its_node_fails_the_attempt(plane: Plane) -> None:
    _placed(plane, "a")
    plane.report(TaskEventKind.STARTED, "a-w-0")
    plane.tick()
    assert plane.task("a-w-0").phase == "Running"
    plane.report(TaskEventKind.LOST, "a-w-0")
    plane.tick()
    assert (plane.job("a").phase, plane.job("a").attempts) == ("Running", 1)  # again, at once
    assert plane.task("a-w-0").phase == "Bound"


def test_a_task_that_cannot_start_fails_with_the_reason_and_the_job_fails_out_of_retries(
    plane: Plane,
) -> None:
    plane.submit("a", maxRetry=0)
    plane.tick()
    why = "the environment is over the kernel's limit: pass large values in a file"
    plane.report(TaskEventKind.FAILED_TO_START, "a-w-0", message=why)
    plane.tick()
    job = plane.job("a")
    assert (job.phase, job.reason) == ("Failed", "RetriesExhausted")
    assert f"task a-w-0 could not start on n0: {why}" in job.message
    assert "no retries left (maxRetry 0)" in job.message
    assert plane.task("a-w-0").phase == "Failed"


def test_an_executor_that_refuses_one_job_fails_that_job_and_starts_the_others(
    plane: Plane,
) -> None:
    plane.executor.refuse.add("bad")
    plane.submit("bad", maxRetry=0)
    plane.submit("good")
    plane.tick()
    assert [b.job for b in plane.executor.started] == ["good"]
    plane.tick()  # the refusal is heard as the bad job's tasks failing to start
    bad = plane.job("bad")
    assert bad.phase == "Failed" and "the executor refused it: no such image" in bad.message
    assert plane.job("good").phase == "Running"


# -- crashes -------------------------------------------------------------------------------


def test_an_exit_whose_started_report_was_lost_in_a_crash_still_ends_the_job(
    plane: Plane,
) -> None:
    _placed(plane, "a")
    record = ProcessRecord(
        job="a", task="a-w-0", node="n0", pid=4242, start_time=plane.clock.now, workdir="/nowhere"
    )
    after = plane.restart(FakeExecutor(known={("a", "a-w-0"): record}))
    assert after.executor.adopted == [record]  # the executor's own record was adopted ...
    assert after.task("a-w-0").phase == "Running"  # ... so the task did start
    after.report(TaskEventKind.EXITED, "a-w-0", exit_code=0)
    after.tick()
    assert after.job("a").phase == "Succeeded"


def test_an_exit_reported_before_its_start_counts_as_a_run(plane: Plane) -> None:
    _placed(plane, "a")
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=0)  # STARTED never came
    plane.tick()
    assert plane.job("a").phase == "Succeeded"
    assert plane.task("a-w-0").started_at is not None


def test_a_bound_task_no_node_recorded_never_started_and_restarts_at_no_retrys_cost(
    plane: Plane,
) -> None:
    _placed(plane, "a")
    after = plane.restart()  # the crash came before any process record was written
    job = after.job("a")
    assert (job.phase, job.attempts) == ("Pending", 0)
    assert CUT_SHORT in job.message
    after.tick()
    assert after.job("a").phase == "Running"  # placed again at once, no backoff


def test_a_started_task_with_no_process_after_a_restart_is_lost_and_retried(
    plane: Plane,
) -> None:
    _placed(plane, "a")
    plane.report(TaskEventKind.STARTED, "a-w-0")
    plane.tick()
    after = plane.restart()  # its STARTED was stored, and no record of it is left
    job = after.job("a")
    assert (job.phase, job.attempts) == ("Pending", 1)
    assert f"lost with its node n0: {UNRECORDED}; retry 1 of 3" in job.message


def test_a_task_on_a_node_the_cluster_no_longer_has_fails_its_job_and_the_server_starts(
    plane: Plane,
) -> None:
    _placed(plane, "a")
    plane.submit("b")
    plane.tick()
    with plane.db.write() as session:  # as if n0 had left the Cluster document
        session.execute(update(TaskRow).where(TaskRow.name == "a-w-0").values(node="gone"))
    b = ProcessRecord(
        job="b", task="b-w-0", node="n0", pid=7, start_time=plane.clock.now, workdir="/nowhere"
    )
    after = plane.restart(FakeExecutor(known={("b", "b-w-0"): b}))
    job = after.job("a")
    assert (job.phase, job.reason) == ("Failed", "Aborted")
    assert "was on node gone, which the cluster no longer has" in job.message
    assert [(e.task, e.node) for e in after.executor.stopped] == [("a-w-0", "gone")]
    after.report(TaskEventKind.EXITED, "b-w-0", exit_code=0)
    after.tick()
    assert after.job("b").phase == "Succeeded"


# -- retries, walltime, cancel -----------------------------------------------------------


def test_a_failed_job_waits_out_a_doubling_backoff_before_each_retry(plane: Plane) -> None:
    _placed(plane, "a")
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=3)
    plane.tick()
    assert plane.job("a").not_before == pytest.approx(plane.clock.now + 10.0)
    plane.tick(5.0)
    assert plane.job("a").phase == "Pending" and len(plane.executor.started) == 1
    plane.tick(5.0)
    assert plane.job("a").phase == "Running" and len(plane.executor.started) == 2
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=3)
    plane.tick()
    job = plane.job("a")
    assert (job.attempts, job.not_before) == (2, pytest.approx(plane.clock.now + 20.0))
    assert "exited with code 3; retry 2 of 3" in job.message


def test_walltime_counts_from_each_attempt_and_not_during_its_backoff(plane: Plane) -> None:
    plane.submit("a", walltime="30s")
    plane.tick()
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=1)
    plane.tick(5.0)  # failed 5 s into its first attempt
    plane.tick(10.0)  # the backoff ended: placed again, 15 s after the first placement
    assert plane.job("a").phase == "Running"
    plane.tick(20.0)  # 35 s after the first placement, 20 s into this attempt
    assert plane.job("a").phase == "Running" and plane.executor.stopped == []
    plane.tick(10.0)  # 30 s into this attempt
    assert [e.action for e in plane.executor.stopped] == ["walltime"]
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=143, stopped=True)
    plane.tick()
    job = plane.job("a")
    assert (job.phase, job.reason) == ("Failed", "WalltimeExceeded")


def test_cancel_during_a_depends_on_wait_ends_the_held_task_without_the_executor(
    plane: Plane,
) -> None:
    roles = _master_then_worker()
    plane.submit("a", roles=roles)
    plane.tick()
    assert [b.task for b in plane.executor.started] == ["a-master-0"]  # the worker waits
    with plane.db.write() as session:
        session.execute(update(JobRow).where(JobRow.name == "a").values(cancel_requested=True))
    plane.controller.wake(Intent.CANCELS)
    plane.tick()
    assert [e.task for e in plane.executor.stopped] == ["a-master-0"]
    assert plane.task("a-worker-0").phase == "Failed"  # stopped before it ever started
    plane.report(TaskEventKind.EXITED, "a-master-0", exit_code=143, stopped=True)
    plane.tick()
    assert plane.job("a").phase == "Cancelled"
    assert [b.task for b in plane.executor.started] == ["a-master-0"]


def _gang(replicas: int = 2) -> list[dict[str, object]]:
    return [{"name": "w", "replicas": replicas, "resources": {"gpu": 1}, "command": "true"}]


def _record(plane: Plane, task: str) -> ProcessRecord:
    node = plane.task(task).node
    assert node is not None
    job = task.rsplit("-", 2)[0]
    return ProcessRecord(
        job=job, task=task, node=node, pid=99, start_time=plane.clock.now, workdir="/nowhere"
    )


def test_a_restart_while_a_failed_gang_stops_keeps_why_it_stops(plane: Plane) -> None:
    plane.submit("a", maxRetry=0, roles=_gang())
    plane.tick()
    for task in ("a-w-0", "a-w-1"):
        plane.report(TaskEventKind.STARTED, task)
    plane.tick()
    plane.report(TaskEventKind.EXITED, "a-w-0", exit_code=1)
    plane.tick()
    assert [e.task for e in plane.executor.stopped] == ["a-w-1"]  # out of retries: stopping
    after = plane.restart(FakeExecutor(known={("a", "a-w-1"): _record(plane, "a-w-1")}))
    assert [e.task for e in after.executor.stopped] == ["a-w-1"]  # the stop is asked again
    after.report(TaskEventKind.EXITED, "a-w-1", exit_code=143, stopped=True)
    after.tick()
    job = after.job("a")
    assert (job.phase, job.reason) == ("Failed", "RetriesExhausted")  # not run again


def test_a_restart_keeps_a_depends_on_role_waiting_instead_of_losing_it(plane: Plane) -> None:
    roles = _master_then_worker()
    plane.submit("a", roles=roles, maxRetry=0)
    plane.tick()
    master = _record(plane, "a-master-0")
    after = plane.restart(FakeExecutor(known={("a", "a-master-0"): master}))
    assert after.job("a").phase == "Running" and after.job("a").attempts == 0
    after.tick()  # the master was adopted, so it runs: the worker may start now
    assert [b.task for b in after.executor.started] == ["a-worker-0"]


def test_a_role_released_and_stopped_in_one_tick_is_started_then_stopped(plane: Plane) -> None:
    roles = _master_then_worker()
    plane.submit("a", roles=roles)
    plane.tick()
    order: list[str] = []
    start, stop = plane.executor.start, plane.executor.stop
    plane.executor.start = lambda binds, now: (order.append("start"), start(binds, now=now))  # type: ignore[method-assign]
    plane.executor.stop = lambda evictions, now, grace: (  # type: ignore[method-assign]
        order.append("stop"),
        stop(evictions, now=now, grace=grace),
    )
    plane.report(TaskEventKind.STARTED, "a-master-0")  # the worker is released ...
    plane.report(TaskEventKind.EXITED, "a-master-0", exit_code=1)  # ... and the gang fails
    plane.tick()
    assert order == ["start", "stop"]
    assert [e.task for e in plane.executor.stopped] == ["a-worker-0"]
