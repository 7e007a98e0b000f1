"""Real tasks under cgroup isolation whose parent is a temporary directory.

The tasks and their wrapper are real processes; the groups are plain directories, so
the test sees exactly what the executor and the wrapper write into them. The kernel is
stood in for where it would act: a test writes ``memory.events`` for an OOM kill, and
clears a group's files where the kernel would let an emptied group go.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.executors.base import OOM_KILLED, TaskEventKind
from phalanx.executors.cgroups import Isolation, IsolationKind
from phalanx.executors.process import EXIT_FILE, JOIN_FAILED, WRAPPER_SCRIPT, spawn
from phalanx.executors.records import ProcessRecord
from tests.integration.executors.harness import Harness, is_gone, wait_for

#: Runs until a file named "go" appears, then exits 5.
WAITS_FOR_GO = "ulimit -v > limit; touch ready; while [ ! -e go ]; do sleep 0.01; done; exit 5"
#: Like WAITS_FOR_GO, but then the kernel's OOM count goes up and the command is killed.
OOM_AFTER_GO = (
    "touch ready; while [ ! -e go ]; do sleep 0.01; done; "
    "printf 'oom 1\\noom_kill 1\\n' > \"$GROUP/memory.events\"; kill -9 $$"
)


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    path = tmp_path / "cgroup" / "phalanx-tasks"
    path.mkdir(parents=True)
    return path


def fake_cgroups(parent: Path) -> Isolation:
    return Isolation(kind=IsolationKind.CGROUP2, reason="a test tree", parent=parent)


@pytest.fixture
def cg(tmp_path: Path, parent: Path) -> Iterator[Harness]:
    h = Harness(tmp_path / "data", isolation=fake_cgroups(parent))
    yield h
    h.close()


def clear(group: Path) -> None:
    """Drop the group's files, as the kernel lets an emptied group's interface go."""
    for path in group.iterdir():
        path.unlink()


def restarted(old: Harness, tmp_path: Path, parent: Path) -> tuple[Harness, list[ProcessRecord]]:
    saved = json.dumps([record.to_dict() for record in old.executor.records()])
    new = Harness(tmp_path / "data", isolation=fake_cgroups(parent))
    new.now = old.now
    return new, [ProcessRecord.from_dict(item) for item in json.loads(saved)]


def test_a_task_runs_inside_its_group_with_its_limits_and_no_rlimit(
    cg: Harness, parent: Path
) -> None:
    launch = cg.launch(command=WAITS_FOR_GO, cpu_millicores=1500, memory_bytes=256 * 2**20)
    cg.start(launch)
    cg.wait_file(launch, "ready")
    group = parent / "job:t0"
    wrapper = cg.pid_of(launch)
    assert {p.name: p.read_text() for p in sorted(group.iterdir())} == {
        "cgroup.procs": str(wrapper),  # the server put it in before the command ran
        "cpu.max": "150000 100000",
        "memory.max": str(256 * 2**20),
    }
    assert cg.wait_file(launch, "limit").strip() == "unlimited"  # memory.max instead
    [record] = cg.executor.records()
    assert (record.isolation, record.cgroup) == (IsolationKind.CGROUP2, str(group))
    assert cg.executor.isolation.describe().startswith(
        f"cgroup2: cpu.max, memory.max (processes not limited) per task under {parent}"
    )
    (cg.workdir(launch) / "go").touch()
    event = cg.wait_event("t0")
    assert (event.exit_code, event.reason) == (5, None)
    assert group.exists()  # still "populated": its removal is retried
    clear(group)
    cg.poll()
    assert not group.exists()


def test_an_oom_kill_in_the_group_ends_the_task_with_the_oom_reason(
    cg: Harness, parent: Path
) -> None:
    group = parent / "job:t0"
    launch = cg.launch(command=OOM_AFTER_GO, memory_bytes=64 * 2**20, env={"GROUP": str(group)})
    cg.start(launch)
    cg.wait_file(launch, "ready")
    (cg.workdir(launch) / "go").touch()
    event = cg.wait_event("t0")
    assert (event.kind, event.exit_code, event.reason) == (TaskEventKind.EXITED, 137, OOM_KILLED)


def test_a_task_that_succeeds_despite_an_oom_kill_has_succeeded(cg: Harness, parent: Path) -> None:
    group = parent / "job:t0"
    command = "printf 'oom_kill 1\\n' > \"$GROUP/memory.events\""  # a child died; the task coped
    cg.start(cg.launch(command=command, env={"GROUP": str(group)}))
    event = cg.wait_event("t0")
    assert (event.exit_code, event.reason) == (0, None)


def test_an_adopted_task_keeps_its_group_which_goes_when_it_ends(
    cg: Harness, parent: Path, tmp_path: Path
) -> None:
    launch = cg.launch(command=WAITS_FOR_GO, cpu_millicores=500)
    cg.start(launch)
    cg.wait_file(launch, "ready")
    (parent / "stale:t9").mkdir()  # an empty group a stopped server left behind
    new, records = restarted(cg, tmp_path, parent)
    try:
        new.executor.adopt(records, now=new.now)
        assert new.poll() == []
        assert not (parent / "stale:t9").exists()  # swept at the first poll
        group = parent / "job:t0"
        assert [r.cgroup for r in new.executor.records()] == [str(group)]
        assert (group / "cpu.max").read_text() == "50000 100000"
        (cg.workdir(launch) / "go").touch()
        assert new.wait_event("t0").exit_code == 5
        clear(group)
        new.poll()
        assert not group.exists()
    finally:
        new.close()


def test_a_task_oom_killed_while_the_server_was_down_is_exited_with_the_oom_reason(
    cg: Harness, parent: Path, tmp_path: Path
) -> None:
    group = parent / "job:t0"
    # The command kills its wrapper too, so no exit code is written: only the group tells.
    command = OOM_AFTER_GO.replace("kill -9 $$", "kill -9 $PPID")
    launch = cg.launch(command=command, memory_bytes=64 * 2**20, env={"GROUP": str(group)})
    cg.start(launch)
    cg.wait_file(launch, "ready")
    new, records = restarted(cg, tmp_path, parent)
    (cg.workdir(launch) / "go").touch()
    wait_for(lambda: is_gone(records[0].pid), "the wrapper to be killed")
    new.executor.adopt(records, now=new.now)
    event = new.wait_event("t0")
    assert (event.kind, event.exit_code, event.reason) == (TaskEventKind.EXITED, 137, OOM_KILLED)


def test_a_task_that_cannot_be_put_in_its_group_fails_to_start_and_runs_nothing(
    tmp_path: Path,
) -> None:
    workdir = tmp_path / "task"
    workdir.mkdir()
    with pytest.raises(OSError, match="cannot put the task into its cgroup") as raised:
        spawn(
            ["/bin/sh", "-c", "touch ran"],
            workdir=workdir,
            env={},
            cgroups=[tmp_path / "no-such-group"],
        )
    assert raised.value.filename == str(tmp_path / "no-such-group" / "cgroup.procs")
    assert not (workdir / "ran").exists()  # killed while it waited: nothing ran


def test_a_held_wrapper_that_is_never_let_go_records_join_failed_and_runs_nothing(
    tmp_path: Path,
) -> None:
    # As when the server died between starting the wrapper and putting it in its group.
    argv = ["/bin/sh", "-c", WRAPPER_SCRIPT, "phalanx-task", str(tmp_path / EXIT_FILE), "-"]
    ended = subprocess.run(
        [*argv, "held", "touch", "ran"],
        check=False,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    assert ended.returncode == JOIN_FAILED
    assert (tmp_path / EXIT_FILE).read_text().split()[0] == str(JOIN_FAILED)
    assert b"did not put the task in its cgroup" in ended.stderr
    assert not (tmp_path / "ran").exists()
