"""Pausing tasks for real: progress stops, resumes, and the throttle drives it."""

from __future__ import annotations

from pathlib import Path

import psutil

from phalanx.domain.job import ServiceClass
from phalanx.executors.base import TaskEventKind
from phalanx.executors.colocation import OfflineThrottle, OnlineLoad
from phalanx.executors.launch import TaskLaunch
from tests.integration.executors.harness import Harness, read_file, wait_for

#: Counts up in ./counter, about every 10 ms, forever.
COUNTS = (
    "i=0; while :; do i=$((i+1)); echo $i > counter.tmp; mv counter.tmp counter; sleep 0.01; done"
)


def group(harness: Harness, launch: TaskLaunch) -> list[psutil.Process]:
    leader = psutil.Process(harness.pid_of(launch))
    return [leader, *leader.children(recursive=True)]


def all_stopped(harness: Harness, launch: TaskLaunch) -> bool:
    """Every process of the task is frozen.

    A zombie child that ended just before the stop counts as frozen. So does a parent
    in uninterruptible sleep whose children are all stopped: dash forks with vfork, and
    a vfork parent waits (in state D) for a child that SIGSTOP caught before its exec.
    """
    frozen = {psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE}
    try:
        for process in group(harness, launch):
            status = process.status()
            if status in frozen:
                continue
            children = process.children()
            if status != psutil.STATUS_DISK_SLEEP or not children:
                return False
            if not all(child.status() in frozen for child in children):
                return False
    except psutil.NoSuchProcess:
        return False
    return True


def counter(harness: Harness, launch: TaskLaunch) -> int:
    text: str = wait_for(lambda: read_file(harness.workdir(launch) / "counter"), "the counter")
    return int(text)


def test_pause_stops_progress_and_resume_restarts_it(harness: Harness) -> None:
    launch = harness.launch(command=COUNTS)
    harness.start(launch)
    harness.wait_event("t0", TaskEventKind.STARTED)
    wait_for(lambda: counter(harness, launch) > 2, "the counter to move")
    assert harness.executor.pause("job", "t0") and harness.executor.is_paused("job", "t0")
    wait_for(lambda: all_stopped(harness, launch), "the group to stop")
    frozen = counter(harness, launch)
    for _ in range(5):  # polls see a frozen task as neither exited nor lost
        assert harness.poll() == []
        assert all_stopped(harness, launch)
    assert counter(harness, launch) == frozen
    harness.now += 30
    assert harness.executor.paused_seconds("job", "t0") >= 30
    assert harness.executor.resume("job", "t0") and not harness.executor.is_paused("job", "t0")
    wait_for(lambda: counter(harness, launch) > frozen, "the counter to move again")
    paused = harness.executor.paused_seconds("job", "t0")
    harness.now += 30
    assert harness.executor.paused_seconds("job", "t0") == paused  # the pause clock stopped


def test_a_paused_task_still_stops_when_asked(harness: Harness) -> None:
    launch = harness.launch(
        command="trap 'exit 7' TERM; touch ready; while :; do sleep 1 & wait $!; done"
    )
    harness.start(launch)
    harness.wait_file(launch, "ready")
    harness.executor.pause("job", "t0")
    wait_for(lambda: all_stopped(harness, launch), "the group to stop")
    harness.stop(launch)
    assert not harness.executor.pause("job", "t0")  # a stopping task is not frozen again
    event = harness.wait_event("t0")
    assert (event.exit_code, event.stopped) == (7, True)


def test_unknown_tasks_cannot_be_paused_or_resumed(harness: Harness) -> None:
    assert not harness.executor.pause("job", "nope")
    assert not harness.executor.resume("job", "nope")
    assert not harness.executor.is_paused("job", "nope")
    assert harness.executor.paused_seconds("job", "nope") == 0.0


def test_the_throttle_pauses_offline_tasks_while_the_signal_is_high(harness: Harness) -> None:
    online = harness.launch("serve", command=COUNTS, workload=ServiceClass.ONLINE)
    offline = harness.launch("train", command=COUNTS, workload=ServiceClass.OFFLINE)
    harness.start(online, offline)
    counter(harness, online)  # each waits for its counter: both really run before the tick
    counter(harness, offline)
    load = [0.95]
    throttle = OfflineThrottle(
        harness.executor, watermark=0.8, signal=lambda: load[0], hysteresis=0.1
    )
    assert throttle.tick()
    wait_for(lambda: all_stopped(harness, offline), "the offline task to stop")
    assert not harness.executor.is_paused("job", "serve")
    serving = counter(harness, online)
    wait_for(lambda: counter(harness, online) > serving, "the online task to keep running")
    load[0] = 0.5
    assert not throttle.tick()
    training = counter(harness, offline)
    wait_for(lambda: counter(harness, offline) > training, "the offline task to run again")


def test_online_load_sees_a_busy_online_task(harness: Harness) -> None:
    busy = harness.launch("serve", command="while :; do :; done", workload=ServiceClass.ONLINE)
    idle = harness.launch("train", command="while :; do :; done", workload=ServiceClass.OFFLINE)
    harness.start(busy, idle)
    signal = OnlineLoad(harness.executor, cores=1, gpu=lambda tasks: 0.0)
    # A spinning shell uses most of a core: the signal rises well above zero.
    wait_for(lambda: signal() > 0.2, "the online CPU load to show")
    harness.executor.pause("job", "serve")
    wait_for(lambda: all_stopped(harness, busy), "the online task to stop")
    signal()  # a fresh measurement window that starts frozen
    wait_for(lambda: signal() < 0.05, "a frozen task to count as idle")


def test_adoption_resumes_a_task_the_old_server_left_paused(
    harness: Harness, tmp_path: Path
) -> None:
    launch = harness.launch(command=COUNTS, workload=ServiceClass.OFFLINE)
    harness.start(launch)
    wait_for(lambda: counter(harness, launch) > 2, "the counter to move")
    harness.executor.pause("job", "t0")
    wait_for(lambda: all_stopped(harness, launch), "the group to stop")
    frozen = counter(harness, launch)
    new = Harness(tmp_path / "data")  # the restarted server: it never paused anything
    try:
        new.executor.adopt(harness.executor.records(), now=new.now)
        assert not new.executor.is_paused("job", "t0")
        wait_for(lambda: counter(harness, launch) > frozen, "the adopted task to run again")
    finally:
        new.close()
