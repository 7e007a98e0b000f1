"""A role's image runs its task in a real podman container through the local executor.

Nothing is mocked: podman runs the test image (``tests.integration.images``, built from
busybox), the launcher runs podman's client, and every test checks that no container
and no process of its tasks is left.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from phalanx.executors.base import TaskEventKind
from phalanx.executors.containers import (
    ENV_FILE,
    RUNTIME_FAILED,
    Ulimit,
    cdi_problem,
    detect_runtime,
)
from phalanx.executors.failures import NO_CONTAINERS
from phalanx.executors.records import ProcessRecord
from tests.integration.executors.harness import Harness, is_gone, wait_for
from tests.integration.images import containers_of

SECRET = "s3cr3t-value-never-on-argv"
#: A grace the fake clock cannot spend before the harness's real deadline (each poll
#: moves it 0.05 s, every 5 ms): only the container's own answer to SIGTERM ends the task
#: (with 10 s, a loaded machine's podman was SIGKILLed after about a second).
LONG_GRACE = 1000.0


@pytest.fixture
def podman(busybox_image: str, tmp_path: Path) -> Iterator[Harness]:
    """An executor over ``tmp_path/data`` with the host's podman; after the test no
    container of its data dir is left, running or not."""
    h = Harness(tmp_path / "data", environ={"PATH": "/usr/bin:/bin", "SECRET_TOKEN": "hunter2"})
    yield h
    h.close()
    assert containers_of(tmp_path / "data") == []


def test_an_image_task_runs_in_its_workdir_with_its_env_and_logs(
    podman: Harness, busybox_image: str
) -> None:
    launch = podman.launch(
        command='echo out; echo err >&2; pwd; echo "$GREETING"; env > env.txt; id -u > uid',
        env={"GREETING": "hello there", "TOKEN": SECRET},
        image=busybox_image,
        cpu_millicores=500,
        memory_bytes=128 * 2**20,
    )
    podman.start(launch)
    event = podman.wait_event("t0")
    assert (event.kind, event.exit_code, event.reason) == (TaskEventKind.EXITED, 0, None)
    workdir = podman.workdir(launch)
    assert (workdir / "stdout.log").read_text() == f"out\n{workdir}\nhello there\n"
    assert (workdir / "stderr.log").read_text() == "err\n"
    env = dict(line.split("=", 1) for line in (workdir / "env.txt").read_text().splitlines())
    assert env["TOKEN"] == SECRET and env["RANK"] == "0" and env["PHALANX_WORKDIR"] == str(workdir)
    assert env["HOME"] == str(workdir)
    assert "SECRET_TOKEN" not in env  # the server's own variables never reach a task
    assert env["PATH"] != "/usr/bin:/bin"  # the image's PATH, not the server's
    assert (workdir / "uid").read_text().strip() == str(os.getuid())


def test_no_value_of_the_env_is_on_any_command_line(podman: Harness, busybox_image: str) -> None:
    launch = podman.launch(
        command="touch ready; sleep 100", env={"TOKEN": SECRET}, image=busybox_image
    )
    podman.start(launch)
    podman.wait_file(launch, "ready")
    lines = [" ".join(p.info["cmdline"] or ()) for p in psutil.process_iter(["cmdline"])]
    client = [line for line in lines if "podman run" in line and "sleep 100" in line]
    assert client and not any(SECRET in line for line in lines)
    env_file = Path(podman.executor.recorded("job", "t0").workdir) / ENV_FILE  # type: ignore[union-attr]
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert not str(env_file).startswith(str(podman.executor.tasks_dir))  # not where tasks write


def test_a_failing_container_reports_its_own_exit_code(podman: Harness, busybox_image: str) -> None:
    podman.start(podman.launch(command="exit 3", image=busybox_image))
    assert podman.wait_event("t0").exit_code == 3


def test_a_command_missing_from_the_image_fails_with_the_runtime_saying_why(
    podman: Harness, busybox_image: str
) -> None:
    launch = podman.launch(command=("no-such-program",), image=busybox_image)
    podman.start(launch)
    # The container's init (--init) cannot exec it: its code is 1, its words in stderr.log.
    assert podman.wait_event("t0").exit_code == 1
    stderr = (podman.workdir(launch) / "stderr.log").read_text()
    assert "failed to exec pid1: No such file or directory" in stderr


def test_a_stopped_container_gets_sigterm_and_leaves_no_container_or_process(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(
        command="trap 'echo term; exit 7' TERM; touch ready; while true; do sleep 0.1; done",
        image=busybox_image,
    )
    podman.start(launch)
    podman.wait_file(launch, "ready")
    pid = podman.pid_of(launch)
    podman.stop(launch, grace=LONG_GRACE)
    event = podman.wait_event("t0")
    assert (event.exit_code, event.stopped) == (7, True)
    assert (podman.workdir(launch) / "stdout.log").read_text() == "term\n"
    assert is_gone(pid)
    assert containers_of(tmp_path / "data") == []


def test_a_container_that_ignores_sigterm_is_killed_through_the_runtime(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(
        command="trap '' TERM; touch ready; while true; do sleep 0.1; done", image=busybox_image
    )
    podman.start(launch)
    podman.wait_file(launch, "ready")
    pid = podman.pid_of(launch)
    podman.stop(launch, grace=0.3)
    event = podman.wait_event("t0")
    assert (event.exit_code, event.stopped) == (137, True)
    assert is_gone(pid)
    wait_for(lambda: containers_of(tmp_path / "data") == [], "the container to be removed")


def test_the_memory_limit_is_enforced(podman: Harness, busybox_image: str) -> None:
    launch = podman.launch(
        command=("dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"),
        image=busybox_image,
        memory_bytes=64 * 2**20,
    )
    podman.start(launch)
    assert podman.wait_event("t0").exit_code == 137  # killed by the kernel's OOM killer
    unlimited = podman.launch("t1", command=launch.command, image=busybox_image)
    podman.start(unlimited)
    assert podman.wait_event("t1").exit_code == 0


def test_an_image_not_on_the_node_fails_to_start_saying_how_to_get_it(podman: Harness) -> None:
    podman.start(podman.launch(command="true", image="localhost/phalanx-no-such-image:1"))
    event = podman.wait_event("t0", TaskEventKind.FAILED_TO_START)
    assert "localhost/phalanx-no-such-image:1" in event.message
    assert "image not known" in event.message  # podman's own words
    assert "podman pull localhost/phalanx-no-such-image:1" in event.message


def test_without_a_runtime_an_image_task_fails_to_start(tmp_path: Path) -> None:
    h = Harness(tmp_path / "data", containers=None)
    try:
        h.start(h.launch(command="true", image="localhost/x:1"))
        assert h.wait_event("t0", TaskEventKind.FAILED_TO_START).message == NO_CONTAINERS
    finally:
        h.close()


def restarted(old: Harness, tmp_path: Path) -> tuple[Harness, list[ProcessRecord]]:
    """A new executor (the restarted server) and the old one's records, through JSON."""
    saved = json.dumps([record.to_dict() for record in old.executor.records()])
    new = Harness(tmp_path / "data")
    new.now = old.now
    return new, [ProcessRecord.from_dict(item) for item in json.loads(saved)]


def test_a_restarted_executor_adopts_a_running_container_and_learns_its_code(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(
        command="touch ready; while [ ! -e go ]; do sleep 0.05; done; exit 5", image=busybox_image
    )
    podman.start(launch)
    podman.wait_file(launch, "ready")
    new, records = restarted(podman, tmp_path)
    try:
        assert [r.container for r in records] == [containers_of(tmp_path / "data")[0]]
        new.executor.adopt(records, now=new.now)
        assert [t.task for t in new.executor.running()] == ["t0"]
        (podman.workdir(launch) / "go").touch()
        event = new.wait_event("t0")
        assert (event.kind, event.exit_code) == (TaskEventKind.EXITED, 5)
    finally:
        new.close()


def test_an_adopted_container_is_killed_through_the_runtime(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(
        command="trap '' TERM; touch ready; while true; do sleep 0.1; done", image=busybox_image
    )
    podman.start(launch)
    podman.wait_file(launch, "ready")
    new, records = restarted(podman, tmp_path)
    try:
        new.executor.adopt(records, now=new.now)
        new.stop(launch, grace=0.2)
        assert new.wait_event("t0").exit_code == 137
        wait_for(lambda: containers_of(tmp_path / "data") == [], "the container to be removed")
    finally:
        new.close()


def test_a_container_whose_client_died_unwatched_is_removed_and_reported_lost(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(command="touch ready; sleep 100", image=busybox_image)
    podman.start(launch)
    podman.wait_file(launch, "ready")
    new, records = restarted(podman, tmp_path)
    try:
        os.killpg(records[0].pid, 9)  # the client and its wrapper die; the container runs on
        wait_for(lambda: is_gone(records[0].pid), "the wrapper to die")
        assert containers_of(tmp_path / "data") != []
        new.executor.adopt(records, now=new.now)
        event = new.wait_event("t0", TaskEventKind.LOST)
        assert event.exit_code is None
        assert containers_of(tmp_path / "data") == []
    finally:
        new.close()


def test_the_runtime_is_detected_with_this_hosts_settings(busybox_image: str) -> None:
    runtime = detect_runtime()
    assert runtime is not None and runtime.kind == "podman"
    assert {u.name for u in runtime.ulimits} == {"nofile", "nproc"}


def container_state(data_dir: Path) -> str:
    """The state (running, paused, ...) of the one container of ``data_dir``."""
    (name,) = containers_of(data_dir)
    inspected = subprocess.run(
        ["podman", "inspect", "--format", "{{.State.Status}}", name],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return inspected.stdout.strip()


def test_a_paused_container_is_frozen_by_the_runtime_and_resumed(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(command="touch ready; sleep 100", image=busybox_image)
    podman.start(launch)
    podman.wait_file(launch, "ready")
    assert podman.executor.pause("job", "t0")
    assert container_state(tmp_path / "data") == "paused"
    assert podman.executor.resume("job", "t0")
    assert container_state(tmp_path / "data") == "running"
    assert podman.executor.pause("job", "t0")
    podman.stop(launch, grace=LONG_GRACE)  # a stop resumes it first, or SIGTERM would wait
    assert podman.wait_event("t0").exit_code == 143


def test_a_container_that_ended_while_no_server_watched_reports_its_code(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    launch = podman.launch(
        command="touch ready; while [ ! -e go ]; do sleep 0.05; done; exit 6", image=busybox_image
    )
    podman.start(launch)
    podman.wait_file(launch, "ready")
    new, records = restarted(podman, tmp_path)
    try:
        (podman.workdir(launch) / "go").touch()
        wait_for(lambda: is_gone(records[0].pid), "the task to end unwatched")
        new.executor.adopt(records, now=new.now)
        event = new.wait_event("t0")
        assert (event.kind, event.exit_code) == (TaskEventKind.EXITED, 6)
        wait_for(lambda: containers_of(tmp_path / "data") == [], "the container to be removed")
    finally:
        new.close()


def test_a_gpu_task_on_a_node_without_a_cdi_spec_fails_to_start_saying_how_to_make_one(
    podman: Harness, busybox_image: str
) -> None:
    if cdi_problem() is None:
        pytest.skip("this node has a CDI spec for NVIDIA GPUs")
    podman.start(podman.launch(command="true", image=busybox_image, gpus=(0,)))
    event = podman.wait_event("t0", TaskEventKind.FAILED_TO_START)
    assert "nvidia-ctk cdi generate" in event.message


def test_a_container_the_runtime_cannot_set_up_ends_with_its_reason(
    busybox_image: str, tmp_path: Path
) -> None:
    runtime = detect_runtime()
    assert runtime is not None
    # A ulimit no kernel has: podman refuses to make the container (exit 125).
    broken = replace(runtime, ulimits=(Ulimit(name="nosuchlimit", soft=1, hard=1),))
    h = Harness(tmp_path / "data", containers=broken)
    try:
        launch = h.launch(command="true", image=busybox_image)
        h.start(launch)
        event = h.wait_event("t0")
        assert (event.exit_code, event.reason) == (125, RUNTIME_FAILED)
        assert "nosuchlimit" in (h.workdir(launch) / "stderr.log").read_text()
    finally:
        h.close()
    assert containers_of(tmp_path / "data") == []


def test_a_container_its_oci_runtime_refuses_to_start_fails_to_start_with_its_words(
    podman: Harness, busybox_image: str
) -> None:
    """runc refuses a mount inside /proc: the container is made and never started, and
    its record says 0. The task could not start, in runc's words; it never succeeded."""
    podman.start(podman.launch(command="true", image=busybox_image, mounts=("/proc/1",)))
    event = podman.wait_event("t0", TaskEventKind.FAILED_TO_START)
    assert "the container runtime refused to start its container" in event.message
    assert "/proc" in event.message


def test_a_mount_through_a_link_fails_to_start_naming_the_link(
    podman: Harness, busybox_image: str, tmp_path: Path
) -> None:
    (tmp_path / "wal").symlink_to(tmp_path / "data")
    podman.start(
        podman.launch(command="true", image=busybox_image, mounts=(str(tmp_path / "wal"),))
    )
    event = podman.wait_event("t0", TaskEventKind.FAILED_TO_START)
    assert f"{tmp_path / 'wal'}: it is a symbolic link to {tmp_path / 'data'}" in event.message
