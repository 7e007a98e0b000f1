"""Real tasks under Unix identities of their own (needs root, as a cluster service has).

Each test gives its tasks uids that no account on the host has, as the control plane's
allocated identities are, and looks from outside (as root) at what they ran as and at
what they own; and at what the server does with the files a task may have replaced.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.domain.job import Hostfile
from phalanx.executors import process
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.failures import NO_IDENTITY
from phalanx.executors.identity import TaskIdentity, unreachable_by_others
from phalanx.executors.launch import GangMember
from phalanx.executors.process import EXIT_FILE
from tests.integration.executors.harness import Harness, wait_for
from tests.integration.tenancy.servers import unused_uid

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")


ALICE = TaskIdentity(uid=unused_uid(70900), gid=unused_uid(70900), name="alice")


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory every uid may pass through (pytest's own temporary root is 0700)."""
    base = tmp_path.parent / f"{tmp_path.name}-world"
    base.mkdir(mode=0o711)
    base.chmod(0o711)
    return base


@pytest.fixture
def per_user(tmp_path: Path, shared: Path) -> Iterator[Harness]:
    h = Harness(tmp_path / "data", tasks_dir=shared / "tasks", per_user=True)
    yield h
    h.close()


def python_for_others() -> str:
    """A Python interpreter another uid can run (the test's own may live under /root)."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info[0]}"):
        if os.path.exists(candidate) and unreachable_by_others(Path(candidate)) is None:
            return candidate
    pytest.skip("no Python interpreter here that other users can run")


def test_a_task_runs_as_its_identity_with_no_group_of_the_server(per_user: Harness) -> None:
    launch = per_user.launch(
        command='id -u > uid; id -G > groups; echo "$HOME $USER $LOGNAME" > who',
        identity=ALICE,
    )
    per_user.start(launch)
    assert per_user.wait_event("t0").exit_code == 0
    workdir = per_user.workdir(launch)
    assert per_user.wait_file(launch, "uid").strip() == str(ALICE.uid)
    assert per_user.wait_file(launch, "groups").split() == [str(ALICE.gid)]
    assert per_user.wait_file(launch, "who").split() == [str(workdir), "alice", "alice"]
    owned = os.stat(workdir)
    assert (owned.st_uid, owned.st_gid, stat.S_IMODE(owned.st_mode)) == (
        ALICE.uid,
        ALICE.gid,
        0o700,
    )
    for log in ("stdout.log", "stderr.log"):
        status = os.stat(workdir / log)
        assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (ALICE.uid, 0o600)
    for passage in (workdir.parent, workdir.parent.parent):  # the job dir and the tasks root
        status = os.stat(passage)
        assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (0, 0o711)
    record = per_user.executor.recorded("job", "t0")
    assert record is not None and not (workdir / "process.json").exists()


def test_a_task_cannot_turn_its_logs_or_exit_code_against_the_server(
    per_user: Harness, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.write_text("root's own\n")
    precious.chmod(0o644)
    # The task leaves a link to a root file, a hard link attempt and a FIFO in its place.
    sabotage = (
        f"rm -f stdout.log stderr.log; ln -s {precious} stdout.log; mkfifo stderr.log; "
        f"rm -f {EXIT_FILE}.tmp; ln -s {precious} {EXIT_FILE}.tmp; exit 3"
    )
    launch = per_user.launch(command=sabotage, identity=ALICE)
    per_user.start(launch)
    assert per_user.wait_event("t0").exit_code == 3
    # Its next run (a retry) logs into fresh files of its own, never through the link.
    per_user.start(per_user.launch(command="echo again", identity=ALICE))

    def second_exit() -> TaskEvent | None:
        per_user.poll()
        ends = [e for e in per_user.events if e.kind is TaskEventKind.EXITED]
        return ends[1] if len(ends) > 1 else None

    assert wait_for(second_exit, "the second run's end").exit_code == 0
    workdir = per_user.workdir(launch)
    assert precious.read_text() == "root's own\n" and os.stat(precious).st_uid == 0
    header, output = (workdir / "stdout.log").read_text().split("\n", 1)
    assert header.startswith("--- attempt 2 ") and output == "again\n"  # the retry's own
    assert stat.S_ISREG(os.lstat(workdir / "stderr.log").st_mode)


def test_a_task_without_an_identity_never_runs_as_the_server(per_user: Harness) -> None:
    per_user.start(per_user.launch(command="touch ran"))
    event = per_user.wait_event("t0", TaskEventKind.FAILED_TO_START)
    assert event.message == NO_IDENTITY
    assert not (per_user.workdir(per_user.launches[("job", "t0")]) / "ran").exists()


def test_a_program_the_identity_cannot_reach_fails_to_start_naming_its_uid(
    per_user: Harness, tmp_path: Path
) -> None:
    hidden = tmp_path / "private" / "tool"  # pytest's temporary root is root's alone
    hidden.parent.mkdir()
    hidden.write_text("#!/bin/sh\ntrue\n")
    hidden.chmod(0o755)
    per_user.start(per_user.launch(command=(str(hidden),), identity=ALICE))
    event = per_user.wait_event("t0", TaskEventKind.FAILED_TO_START)
    closed = next(d for d in reversed(hidden.parents) if not os.stat(d).st_mode & stat.S_IXOTH)
    assert event.message == (
        f"permission denied: the task runs as uid {ALICE.uid}, and {closed} "
        f"does not let uid {ALICE.uid} pass (mode 0700): let it through (chmod o+x on the "
        "directories, o+rx on the program), or put the program where every user can run it"
    )


def test_tasks_of_two_identities_cannot_read_each_others_directories(per_user: Harness) -> None:
    bob = TaskIdentity(uid=unused_uid(ALICE.uid + 1), gid=unused_uid(ALICE.uid + 1), name="bob")
    python = python_for_others()
    alice = per_user.launch(command="echo secret > diary; echo alice-out", identity=ALICE)
    per_user.start(alice)
    assert per_user.wait_event("t0").exit_code == 0
    spy = (
        "import os, sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path).read(); print('read', path)\n"
        "    except PermissionError:\n"
        "        print('denied', path)\n"
    )
    target = per_user.workdir(alice)
    bob_launch = per_user.launch(
        "b0",
        command=(python, "-c", spy, str(target / "diary"), str(target / "stdout.log")),
        identity=bob,
    )
    per_user.start(bob_launch)
    assert per_user.wait_event("b0").exit_code == 0
    out = (per_user.workdir(bob_launch) / "stdout.log").read_text().splitlines()
    assert out == [f"denied {target / 'diary'}", f"denied {target / 'stdout.log'}"]


@pytest.mark.parametrize("switch", ["setpriv", "fork"])
def test_either_way_of_switching_leaves_the_task_no_privilege(
    shared: Path, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    """``setpriv`` (so the launcher can vfork) and the fork fallback give the same ids,
    saved ones included, and no capability at all."""
    if switch == "setpriv" and process.SETPRIV is None:
        pytest.skip("util-linux's setpriv is not on this host")
    if switch == "fork":
        monkeypatch.setattr(process, "SETPRIV", None)
    workdir = shared / "task"
    workdir.mkdir(mode=0o700)
    os.chown(workdir, ALICE.uid, ALICE.gid)
    fields = "^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb):"
    task = process.spawn(
        ["/bin/grep", "-E", fields, "/proc/self/status"],
        workdir=workdir,
        env={"PATH": "/usr/bin:/bin"},
        identity=ALICE,
        fresh=True,
    )
    assert wait_for(task.poll, "the task to end").code == 0
    lines = (workdir / process.STDOUT_LOG).read_text().splitlines()
    status = {name: value.split() for name, value in (line.split(":", 1) for line in lines)}
    assert status["Uid"] == [str(ALICE.uid)] * 4  # real, effective, saved and file system
    assert status["Gid"] == [str(ALICE.gid)] * 4
    assert status["Groups"] == []
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[capabilities][0], 16) == 0


def test_a_hostfile_is_the_tasks_own_and_never_written_through_its_link(
    per_user: Harness, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.write_text("root's own\n")
    precious.chmod(0o644)
    gang = (
        GangMember(role="launcher", index=0, node="n0"),
        GangMember(role="worker", index=0, node="n1"),
    )
    fields: dict[str, Any] = {"role": "launcher", "gang": gang, "identity": ALICE}
    hostfile = Hostfile(role="worker", slots=2)
    # The first run plants a link where its next run's hostfile goes.
    first = per_user.launch(
        # (relative paths: pytest's own root, on the way to the absolute one, is 0700)
        command=f'test "$PHALANX_HOSTFILE" = "$PWD/hostfile" && test -r hostfile && '
        f"rm -f hostfile && ln -s {precious} hostfile",
        hostfile=hostfile,
        **fields,
    )
    per_user.start(first)
    assert per_user.wait_event("t0").exit_code == 0
    assert (per_user.workdir(first) / "hostfile").is_symlink()
    per_user.start(per_user.launch(command="cat hostfile", hostfile=hostfile, **fields))

    def second_exit() -> TaskEvent | None:
        per_user.poll()
        ends = [e for e in per_user.events if e.kind is TaskEventKind.EXITED]
        return ends[1] if len(ends) > 1 else None

    assert wait_for(second_exit, "the second run's end").exit_code == 0
    path = per_user.workdir(first) / "hostfile"
    assert precious.read_text() == "root's own\n" and os.stat(precious).st_uid == 0
    assert not path.is_symlink() and path.read_text() == "127.0.0.1 slots=2\n"
    status = os.stat(path)
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (
        ALICE.uid,
        ALICE.gid,
        0o600,
    )
    header, output = (per_user.workdir(first) / "stdout.log").read_text().split("\n", 1)
    assert header.startswith("--- attempt 2 ") and output == "127.0.0.1 slots=2\n"
