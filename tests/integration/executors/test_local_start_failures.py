"""Tasks the local executor cannot start: FAILED_TO_START with the cause, never LOST,
never an exception out of ``start``, and never a hold on another job's tasks."""

from __future__ import annotations

import json
from dataclasses import replace

from phalanx.executors.base import COMMAND_NOT_FOUND, TaskEvent, TaskEventKind
from phalanx.executors.failures import TOO_BIG
from phalanx.executors.process import NAME_MAX
from phalanx.executors.taskdirs import RECORD_FILE
from tests.integration.executors.harness import Harness, wait_for


def _outcome(harness: Harness, task: str) -> TaskEvent:
    """The task's last event once it has ended or failed to start."""
    ends = (TaskEventKind.EXITED, TaskEventKind.FAILED_TO_START, TaskEventKind.LOST)

    def ended() -> TaskEvent | None:
        harness.poll()
        return next(
            (e for e in reversed(harness.events) if e.task == task and e.kind in ends), None
        )

    event: TaskEvent = wait_for(ended, f"{task} to end")
    return event


def _kinds(harness: Harness, task: str) -> list[TaskEventKind]:
    return [e.kind for e in harness.events if e.task == task]


def test_an_environment_over_the_kernel_limit_fails_to_start_alone(harness: Harness) -> None:
    big = harness.launch("big", job="big", command=("true",), env={"V": "x" * 200 * 1024})
    fine = harness.launch("fine", job="other", command=("true",))
    harness.start(big, fine)
    failed = _outcome(harness, "big")
    assert (failed.kind, failed.message, failed.node) == (
        TaskEventKind.FAILED_TO_START,
        TOO_BIG,
        "n0",
    )
    assert _outcome(harness, "fine").exit_code == 0
    assert _kinds(harness, "big") == [TaskEventKind.FAILED_TO_START]
    assert [t.task for t in harness.executor.running()] == []


def test_a_nul_character_in_the_environment_fails_to_start_with_the_fix(harness: Harness) -> None:
    harness.start(harness.launch(command=("true",), env={"V": "a\x00b"}))
    failed = _outcome(harness, "t0")
    assert failed.kind is TaskEventKind.FAILED_TO_START
    assert "embedded null byte" in failed.message and "remove NUL characters" in failed.message


def test_a_missing_program_fails_to_start_and_a_missing_one_in_a_shell_line_exits_127(
    harness: Harness,
) -> None:
    harness.start(
        harness.launch("argv", command=("phalanx-no-such-program", "-x")),
        harness.launch("path", command=("/nonexistent/program",), index=1),
        harness.launch("shell", command="phalanx-no-such-program -x", index=2),
    )
    argv = _outcome(harness, "argv")
    assert argv.kind is TaskEventKind.FAILED_TO_START
    assert argv.message.startswith("command not found: 'phalanx-no-such-program'")
    assert "PATH (/usr/bin:/bin)" in argv.message
    path = _outcome(harness, "path")
    assert path.kind is TaskEventKind.FAILED_TO_START
    assert "command not found: '/nonexistent/program' does not exist" in path.message
    shell = _outcome(harness, "shell")
    assert (shell.kind, shell.exit_code, shell.reason) == (
        TaskEventKind.EXITED,
        127,
        COMMAND_NOT_FOUND,
    )
    stderr = (harness.executor.workdir("job", "shell") / "stderr.log").read_text()
    assert "phalanx-no-such-program" in stderr and "not found" in stderr


def test_a_task_that_cannot_get_a_directory_fails_to_start_naming_the_path(
    harness: Harness,
) -> None:
    harness.executor.data_dir.mkdir(parents=True)
    (harness.executor.data_dir / "tasks").write_text("not a directory")
    harness.start(harness.launch(command=("/bin/true",)))
    failed = _outcome(harness, "t0")
    assert _kinds(harness, "t0") == [TaskEventKind.FAILED_TO_START]
    assert str(harness.executor.data_dir / "tasks") in failed.message


def test_a_launch_that_cannot_be_made_fails_its_job_only(harness: Harness) -> None:
    bad_0 = harness.launch("b0", job="bad", command=("true",))
    bad_1 = harness.launch("b1", job="bad", command=("true",), index=1)
    fine = harness.launch("f0", job="fine", command=("true",))
    harness.launches[("bad", "b1")] = replace(bad_1, task="elsewhere")  # resolve is wrong
    harness.start(bad_0, bad_1, fine)
    for task in ("b0", "b1"):
        failed = _outcome(harness, task)
        assert failed.kind is TaskEventKind.FAILED_TO_START and failed.job == "bad"
        assert failed.message.startswith("resolve: resolve gave bad/elsewhere")
    assert _outcome(harness, "f0").exit_code == 0
    assert not harness.executor.workdir("bad", "b0").exists()  # none of the gang started


def test_names_as_long_as_a_job_can_have_run_and_their_record_is_found(
    harness: Harness,
) -> None:
    job = "j" * 253
    task = f"{job}-{'r' * 63}-99999"
    launch = harness.launch(task, job=job, command="echo ok > out", index=99999)
    harness.start(launch)
    assert _outcome(harness, task).exit_code == 0
    workdir = harness.executor.workdir(job, task)
    assert (workdir / "out").read_text() == "ok\n"
    assert all(len(part.encode()) <= NAME_MAX for part in workdir.parts)
    record = harness.executor.recorded(job, task)  # what a restarted server looks up
    assert record is not None and record.workdir == str(workdir)
    kept = harness.executor.data_dir / "records" / workdir.parent.name / workdir.name
    assert json.loads((kept / RECORD_FILE).read_text())["task"] == task
    assert not (workdir / RECORD_FILE).exists()  # never where the task could write it


def test_long_names_with_the_same_start_get_directories_of_their_own(harness: Harness) -> None:
    first = harness.launch("a" * 300 + "-0", command="echo one > out")
    second = harness.launch("a" * 300 + "-1", command="echo two > out", index=1)
    harness.start(first, second)
    assert _outcome(harness, first.task).exit_code == 0
    assert _outcome(harness, second.task).exit_code == 0
    assert (harness.workdir(first) / "out").read_text() == "one\n"
    assert (harness.workdir(second) / "out").read_text() == "two\n"
    assert harness.workdir(first) != harness.workdir(second)
