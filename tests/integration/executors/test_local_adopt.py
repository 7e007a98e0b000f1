"""Crash safety: a new executor re-adopts live tasks from records and learns their codes."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psutil

from phalanx.domain.job import ServiceClass
from phalanx.executors.base import TaskEventKind
from phalanx.executors.cgroups import Isolation
from phalanx.executors.local import UNWATCHED_END
from phalanx.executors.records import ProcessRecord
from tests.integration.executors.harness import Harness, is_gone, wait_for

#: Runs until a file named "go" appears, then exits 5.
WAITS_FOR_GO = "touch ready; while [ ! -e go ]; do sleep 0.01; done; exit 5"


def restarted(old: Harness, tmp_path: Path) -> tuple[Harness, list[ProcessRecord]]:
    """A new executor (the restarted server) and the old one's records, through JSON."""
    saved = json.dumps([record.to_dict() for record in old.executor.records()])
    records = [ProcessRecord.from_dict(item) for item in json.loads(saved)]
    new = Harness(tmp_path / "data")
    new.now = old.now
    return new, records


def test_an_adopted_task_is_reported_with_its_real_exit_code(
    harness: Harness, tmp_path: Path
) -> None:
    launch = harness.launch(command=WAITS_FOR_GO, workload=ServiceClass.OFFLINE, gpus=(1,))
    harness.start(launch)
    harness.wait_file(launch, "ready")
    new, records = restarted(harness, tmp_path)
    try:
        new.executor.adopt(records, now=new.now)
        assert new.poll() == []  # adopted silently: it started long ago
        assert [(t.task, t.workload, t.gpus) for t in new.executor.running()] == [
            ("t0", ServiceClass.OFFLINE, (1,))
        ]
        new.executor.adopt(records, now=new.now)  # adopting twice changes nothing
        assert len(new.executor.running()) == 1
        (harness.workdir(launch) / "go").touch()
        event = new.wait_event("t0")
        assert (event.kind, event.exit_code, event.stopped, event.node) == (
            TaskEventKind.EXITED,
            5,
            False,
            "n0",
        )
    finally:
        new.close()


def test_an_adopted_task_can_be_stopped_and_killed(harness: Harness, tmp_path: Path) -> None:
    launch = harness.launch(command="trap '' TERM; touch ready; while :; do sleep 1; done")
    harness.start(launch)
    harness.wait_file(launch, "ready")
    new, records = restarted(harness, tmp_path)
    try:
        new.executor.adopt(records, now=new.now)
        new.stop(launch, grace=0.2)
        event = new.wait_event("t0")
        # No exit_code file after a SIGKILL: the code is known because this executor killed it.
        assert (event.exit_code, event.stopped) == (137, True)
    finally:
        new.close()


def test_a_task_started_by_a_server_that_died_is_adopted(tmp_path: Path) -> None:
    """The old server is a real process that exits, so the task is no child of ours."""
    data_dir = tmp_path / "data"
    old_server = f"""
import json, sys, time
from pathlib import Path
from phalanx.engine.decisions import Bind
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.local import LocalExecutor
launch = TaskLaunch(job="job", task="t0", role="worker", index=0, node="n0", command={WAITS_FOR_GO!r})
executor = LocalExecutor({str(data_dir)!r}, lambda bind: launch)
executor.start([Bind(job="job", task="t0", role="worker", index=0, node="n0")], now=time.time())
print(json.dumps([r.to_dict() for r in executor.records()]))
"""
    output = subprocess.run(
        [sys.executable, "-c", old_server], capture_output=True, text=True, check=True
    )
    records = [ProcessRecord.from_dict(item) for item in json.loads(output.stdout)]
    new = Harness(data_dir)
    try:
        new.executor.adopt(records, now=new.now)
        assert [t.pid for t in new.executor.running()] == [records[0].pid]
        workdir = Path(records[0].workdir)
        wait_for((workdir / "ready").exists, "the task to run")
        (workdir / "go").touch()
        assert new.wait_event("t0").exit_code == 5
    finally:
        new.close()
        wait_for(lambda: is_gone(records[0].pid), "the adopted wrapper to end")


def test_a_record_whose_pid_was_reused_is_lost(tmp_path: Path) -> None:
    """The pid's new owner is never signalled. (Without cgroups: under them, a recorded
    task's group is the task's, and whatever is left in it is killed with it.)"""
    old = Harness(tmp_path / "data", isolation=Isolation.rlimit("test"))
    launch = old.launch(command=WAITS_FOR_GO)
    old.start(launch)
    old.wait_file(launch, "ready")
    saved = [
        replace(record, start_time=record.start_time - 60) for record in old.executor.records()
    ]
    new = Harness(tmp_path / "data", isolation=Isolation.rlimit("test"))
    new.now = old.now
    try:
        # The same pid with another start time: some other process got the pid.
        new.executor.adopt(saved, now=new.now)
        event = new.wait_event("t0", TaskEventKind.LOST)
        assert (event.job, event.node, event.exit_code) == ("job", "n0", None)
        assert new.executor.running() == []
        assert psutil.Process(saved[0].pid).status() != psutil.STATUS_ZOMBIE  # left alone
    finally:
        new.close()
        old.close()


def test_a_record_with_a_dead_pid_and_no_code_is_lost(tmp_path: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    record = ProcessRecord(
        job="job",
        task="t0",
        node="n0",
        pid=int(finished.stdout),
        start_time=1.0,
        workdir=str(tmp_path / "nowhere"),
    )
    harness = Harness(tmp_path / "data")
    harness.executor.adopt([record], now=harness.now)
    events = harness.poll()
    assert [e.kind for e in events] == [TaskEventKind.LOST]
    assert events[0].message == UNWATCHED_END and "left no exit code" in UNWATCHED_END


def test_a_task_that_ended_while_the_server_was_down_reports_its_code(
    harness: Harness, tmp_path: Path
) -> None:
    launch = harness.launch(command=WAITS_FOR_GO)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    new, records = restarted(harness, tmp_path)
    (harness.workdir(launch) / "go").touch()
    harness.wait_event("t0")  # the old executor (still our parent here) reaps it
    new.executor.adopt(records, now=new.now)
    event = new.wait_event("t0")
    assert (event.kind, event.exit_code) == (TaskEventKind.EXITED, 5)
