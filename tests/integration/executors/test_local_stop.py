"""Stopping tasks: SIGTERM reaches the real command, SIGKILL follows the grace, groups die whole."""

from __future__ import annotations

import signal
import sys

from phalanx.engine.decisions import Evict
from phalanx.executors.base import TaskEventKind
from tests.integration.executors.harness import Harness, is_gone, wait_for

#: Traps SIGTERM, notes it, exits 7. The sleep is in the background so the trap runs at once.
TRAPS_TERM = "trap 'echo term > got; exit 7' TERM; touch ready; while :; do sleep 1 & wait $!; done"
#: Ignores SIGTERM entirely (its sleeps inherit the ignored disposition too).
IGNORES_TERM = "trap '' TERM; touch ready; while :; do sleep 1; done"


def test_a_command_trapping_sigterm_observes_it_and_its_code_is_reported(harness: Harness) -> None:
    launch = harness.launch(command=TRAPS_TERM)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    harness.stop(launch)
    event = harness.wait_event("t0")
    assert (event.exit_code, event.stopped) == (7, True)
    assert harness.wait_file(launch, "got") == "term\n"


def test_an_argv_command_receives_sigterm_too(harness: Harness) -> None:
    script = (
        "import signal, sys, pathlib\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(9))\n"
        "pathlib.Path('ready').touch()\n"
        "signal.pause()\n"
    )
    launch = harness.launch(command=(sys.executable, "-c", script))
    harness.start(launch)
    harness.wait_file(launch, "ready")
    harness.stop(launch)
    assert harness.wait_event("t0").exit_code == 9


def test_a_command_ignoring_sigterm_is_killed_after_the_grace(harness: Harness) -> None:
    launch = harness.launch(command=IGNORES_TERM)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    harness.stop(launch, grace=0.2)
    harness.poll()  # the fake clock is still inside the grace: no SIGKILL yet
    assert not is_gone(harness.pid_of(launch))
    event = harness.wait_event("t0")  # polls advance the clock past the deadline
    assert (event.exit_code, event.stopped) == (128 + signal.SIGKILL, True)


def test_a_repeated_stop_keeps_the_first_deadline(harness: Harness) -> None:
    launch = harness.launch(command=IGNORES_TERM)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    harness.stop(launch, grace=0.2)
    harness.now += 0.3
    harness.stop(launch, grace=100.0)
    assert harness.wait_event("t0").exit_code == 128 + signal.SIGKILL


def test_stop_kills_the_whole_process_group(harness: Harness) -> None:
    launch = harness.launch(
        command="sleep 60 & echo $! > grandchild.tmp; mv grandchild.tmp grandchild; wait"
    )
    harness.start(launch)
    grandchild = int(harness.wait_file(launch, "grandchild"))
    harness.stop(launch)
    assert harness.wait_event("t0").stopped
    wait_for(lambda: is_gone(grandchild), "the grandchild to die")


def test_processes_left_behind_die_with_the_task(harness: Harness) -> None:
    launch = harness.launch(
        command="sleep 60 & echo $! > grandchild.tmp; mv grandchild.tmp grandchild"
    )
    harness.start(launch)
    event = harness.wait_event("t0")
    assert (event.exit_code, event.stopped) == (0, False)
    grandchild = int(harness.wait_file(launch, "grandchild"))
    wait_for(lambda: is_gone(grandchild), "the orphaned grandchild to die")


def test_stopping_unknown_or_ended_tasks_is_harmless(harness: Harness) -> None:
    launch = harness.launch(command=("true",))
    harness.start(launch)
    harness.wait_event("t0")
    harness.stop(launch)
    unknown = Evict(job="nope", task="nope", node="n0", action="reclaim", by="x", reason="test")
    harness.executor.stop([unknown], now=harness.now, grace=0.0)
    harness.poll()
    assert [e.kind for e in harness.events] == [TaskEventKind.STARTED, TaskEventKind.EXITED]
