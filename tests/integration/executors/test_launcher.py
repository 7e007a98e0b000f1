"""The launcher process: tasks are its children, it reaps them, and its death loses nothing."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from phalanx.engine.decisions import Bind
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.launcher import Failed, Launcher, Start, Started
from phalanx.executors.local import LocalExecutor
from phalanx.executors.records import read_record
from tests.integration.executors.harness import Harness, is_gone, wait_for

#: Runs until a file named "go" appears, then exits 5.
WAITS_FOR_GO = "touch ready; while [ ! -e go ]; do sleep 0.01; done; exit 5"


def launcher_of(harness: Harness, pid: int) -> psutil.Process:
    """The launcher process: the parent of the task whose wrapper is ``pid``."""
    parent = psutil.Process(pid).parent()
    assert parent is not None
    return parent


def closed(pid: int) -> bool:
    """True once ``pid`` has ended with all its threads, and so closed its files: a killed
    process's main thread is a zombie while its other threads still exit."""
    try:
        return is_gone(pid) and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def test_tasks_are_the_launchers_children_and_their_record_is_written_first(
    harness: Harness,
) -> None:
    launch = harness.launch(command=WAITS_FOR_GO)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    pid = harness.pid_of(launch)
    launcher = launcher_of(harness, pid)
    assert launcher.pid != os.getpid()
    assert launcher.ppid() == os.getpid()  # the server's child, in a session of its own
    assert os.getsid(launcher.pid) == launcher.pid != os.getsid(0)
    record = harness.executor.recorded("job", "t0")
    assert record is not None and record.pid == pid  # on disk before STARTED was reported
    assert [e.kind for e in harness.poll()] == [TaskEventKind.STARTED]
    (harness.workdir(launch) / "go").touch()
    assert harness.wait_event("t0").exit_code == 5
    assert is_gone(pid) and not psutil.pid_exists(pid)  # reaped by the launcher, no zombie


def test_a_stop_after_the_task_ended_signals_nothing(harness: Harness) -> None:
    launch = harness.launch(command="exit 3")
    harness.start(launch)
    assert harness.wait_event("t0").exit_code == 3
    harness.stop(launch, grace=0.0)  # unknown by now: ignored, never sent to a reused pid
    assert [e.kind for e in harness.poll()] == []


def test_tasks_of_a_launcher_that_died_are_readopted_and_report_their_codes(
    harness: Harness,
) -> None:
    first = harness.launch("t0", command=WAITS_FOR_GO)
    harness.start(first)
    harness.wait_file(first, "ready")
    pid = harness.pid_of(first)
    dead = launcher_of(harness, pid)
    dead.send_signal(signal.SIGKILL)
    wait_for(lambda: closed(dead.pid), "the launcher to die")
    harness.poll()  # the executor finds its launcher gone and re-adopts the task
    assert [t.pid for t in harness.executor.running()] == [pid]
    second = harness.launch("t1", command=WAITS_FOR_GO)
    harness.start(second)  # a new launcher starts it
    harness.wait_file(second, "ready")
    assert launcher_of(harness, harness.pid_of(second)).pid != dead.pid
    for launch in (first, second):
        (harness.workdir(launch) / "go").touch()
        assert harness.wait_event(launch.task).exit_code == 5  # t0's from its exit_code file


class ForgetfulLauncher(Launcher):
    """Starts tasks for real, then loses every reply (as when it dies just after)."""

    def start(self, requests: Sequence[Start]) -> list[tuple[Started | Failed, float] | None]:
        super().start(requests)
        return [None] * len(requests)


def test_a_start_whose_reply_was_lost_is_found_by_its_record(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = harness.executor
    forgetful = ForgetfulLauncher(
        tasks_root=executor.tasks_dir, records_root=executor.data_dir / "records"
    )
    monkeypatch.setattr(executor, "_launcher", forgetful)
    launch = harness.launch(command=WAITS_FOR_GO)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    record = read_record(executor.data_dir / "records" / "job" / "t0" / "process.json")
    events = harness.poll()
    assert [e.kind for e in events] == [TaskEventKind.STARTED]
    assert record is not None and [t.pid for t in executor.running()] == [record.pid]
    (harness.workdir(launch) / "go").touch()
    assert harness.wait_event("t0").exit_code == 5
    forgetful.close()


def test_a_start_the_launcher_refused_names_the_cause(harness: Harness) -> None:
    tasks = harness.executor.tasks_dir
    tasks.mkdir(parents=True)
    (tasks / "job").write_text("a file where the job's directory goes")
    harness.start(harness.launch(command="true"))
    event = harness.wait_event("t0", TaskEventKind.FAILED_TO_START)
    assert str(tasks / "job") in event.message


def test_an_end_is_announced_so_that_the_controller_ticks_for_it(tmp_path: Path) -> None:
    news: list[int] = []
    harness = Harness(tmp_path / "data", on_events=lambda: news.append(1))
    try:
        harness.start(harness.launch(command="exit 2"))
        wait_for(lambda: news, "the end to be announced")
        assert harness.wait_event("t0").exit_code == 2
    finally:
        harness.close()


def test_a_start_right_after_the_launcher_died_goes_to_a_new_one(harness: Harness) -> None:
    first = harness.launch("t0", command=WAITS_FOR_GO)
    harness.start(first)
    harness.wait_file(first, "ready")
    dead = launcher_of(harness, harness.pid_of(first))
    dead.send_signal(signal.SIGKILL)
    wait_for(lambda: closed(dead.pid), "the launcher to die")
    second = harness.launch("t1", command=WAITS_FOR_GO)
    harness.start(second)  # no poll between: nothing has noticed the death yet
    harness.wait_file(second, "ready")
    assert not [e for e in harness.poll() if e.kind is TaskEventKind.FAILED_TO_START]
    for launch in (first, second):
        (harness.workdir(launch) / "go").touch()
        assert harness.wait_event(launch.task).exit_code == 5


def test_each_start_of_a_batch_is_stamped_when_the_launcher_answered(tmp_path: Path) -> None:
    ticks = itertools.count(1000.0, 0.5)  # a clock that moves on at every reading
    launches = {
        f"t{i}": TaskLaunch(
            job="job", task=f"t{i}", role="worker", index=i, node="n0", command="true"
        )
        for i in range(3)
    }
    executor = LocalExecutor(
        tmp_path / "data", lambda bind: launches[bind.task], clock=lambda: next(ticks)
    )
    binds = [
        Bind(job="job", task=task, role="worker", index=launch.index, node="n0")
        for task, launch in launches.items()
    ]
    executor.start(binds, now=999.0)
    events: list[TaskEvent] = []

    def ended() -> bool:
        events.extend(executor.poll(now=5000.0))
        return sum(e.kind is TaskEventKind.EXITED for e in events) == 3

    wait_for(ended, "the three tasks to end")
    executor.close()
    started = [e.time for e in events if e.kind is TaskEventKind.STARTED]
    assert len(started) == 3 and 999.0 < started[0] < started[1] < started[2] < 5000.0
