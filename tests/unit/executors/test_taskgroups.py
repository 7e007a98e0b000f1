"""Per-task groups against a temporary directory standing in for the task parent.

A plain directory differs from cgroupfs in one way that matters here: its interface
files are real files, so ``rmdir`` refuses a group until a test removes them, which is
what the kernel does for a group that still holds processes.
"""

from __future__ import annotations

import errno
import logging
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from phalanx.executors import taskgroups
from phalanx.executors.cgroups import Isolation, IsolationKind
from phalanx.executors.taskgroups import (
    NAME_MAX,
    LimitDefaults,
    TaskGroup,
    TaskGroups,
    cpu_max,
    create_group,
    group_name,
    kill_members,
    oom_kills,
    remove_group,
)


def files(group: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(group.iterdir()) if p.is_file()}


def clear(group: Path) -> None:
    """Drop the interface files, as the kernel does once a group is empty."""
    for path in group.iterdir():
        path.unlink()


def groups_under(parent: Path) -> TaskGroups:
    return TaskGroups(Isolation(kind=IsolationKind.CGROUP2, reason="test", parent=parent))


@pytest.mark.parametrize(
    ("millicores", "line"),
    [
        (1500, "150000 100000"),
        (1000, "100000 100000"),
        (250, "25000 100000"),
        (64000, "6400000 100000"),
        (5, "1000 100000"),  # the kernel's smallest quota
        (None, "max 100000"),
    ],
)
def test_cpu_max_is_the_request_as_quota_per_period(millicores: int | None, line: str) -> None:
    assert cpu_max(millicores) == line


def test_group_names_are_the_task_and_never_collide() -> None:
    assert group_name("bert", "bert-master-0") == "bert:bert-master-0"
    assert group_name("a:b", "c") == "a%3Ab:c" != group_name("a", "b:c") == "a:b%3Ac"
    assert group_name("100%", "x") == "100%25:x"
    long_a, long_b = group_name("j" * 200, "a" * 100), group_name("j" * 200, "b" * 100)
    assert len(long_a.encode()) <= NAME_MAX and long_a != long_b
    assert long_a.startswith("j" * 200 + ":")


def test_a_group_gets_exactly_the_requested_limits(tmp_path: Path) -> None:
    group = create_group(tmp_path, "j:t", cpu_millicores=1500, memory_bytes=512 * 2**20)
    assert group == tmp_path / "j:t"
    assert files(group) == {"cpu.max": "150000 100000", "memory.max": str(512 * 2**20)}


def test_swap_is_turned_off_where_the_parent_accounts_it(tmp_path: Path) -> None:
    (tmp_path / "memory.swap.max").write_text("max\n")
    limited = create_group(tmp_path, "j:a", cpu_millicores=None, memory_bytes=2**30)
    unlimited = create_group(tmp_path, "j:b", cpu_millicores=None, memory_bytes=None)
    assert files(limited) == {
        "cpu.max": "max 100000",
        "memory.max": str(2**30),
        "memory.swap.max": "0",
    }
    assert files(unlimited) == {
        "cpu.max": "max 100000",
        "memory.max": "max",
        "memory.swap.max": "max",
    }


def test_an_empty_group_of_an_earlier_run_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "j:t").mkdir()  # empty: its OOM count must not be read as the new run's
    group = create_group(tmp_path, "j:t", cpu_millicores=100, memory_bytes=None)
    assert files(group)["cpu.max"] == "10000 100000"


def test_a_group_still_in_use_is_refused(tmp_path: Path) -> None:
    busy = tmp_path / "j:t"
    busy.mkdir()
    (busy / "cgroup.procs").write_text("77\n")
    with pytest.raises(OSError, match="still in use") as error:
        create_group(tmp_path, "j:t", cpu_millicores=None, memory_bytes=None)
    assert error.value.errno == errno.EBUSY
    assert files(busy) == {"cgroup.procs": "77\n"}


def test_a_group_whose_limits_cannot_be_written_is_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path, value: str) -> None:  # as when the cpu controller is not enabled
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(taskgroups, "write_value", refuse)
    with pytest.raises(PermissionError):
        create_group(tmp_path, "j:t", cpu_millicores=None, memory_bytes=None)
    assert list(tmp_path.iterdir()) == []


def test_oom_kills_come_from_memory_events(tmp_path: Path) -> None:
    assert oom_kills(tmp_path) == 0  # no memory.events: unknown counts as none
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert oom_kills(tmp_path) == 2


def test_leftovers_are_killed_through_cgroup_kill(tmp_path: Path) -> None:
    (tmp_path / "cgroup.kill").write_text("")
    (tmp_path / "cgroup.events").write_text("populated 0\nfrozen 0\n")
    kill_members(tmp_path)
    assert (tmp_path / "cgroup.kill").read_text() == ""  # nothing in it: nothing written
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    kill_members(tmp_path)
    assert (tmp_path / "cgroup.kill").read_text() == "1"


def test_leftovers_are_killed_one_by_one_without_cgroup_kill(tmp_path: Path) -> None:
    leftover = subprocess.Popen(["sleep", "600"])
    try:
        (tmp_path / "cgroup.events").write_text("populated 1\n")
        (tmp_path / "cgroup.procs").write_text(f"{leftover.pid}\n")
        kill_members(tmp_path)
        assert leftover.wait() == -9
    finally:
        leftover.kill()
        leftover.wait()


def test_remove_group_is_true_once_gone() -> None:
    assert remove_group(Path("/nonexistent/phalanx/j:t"))


def test_an_ended_group_reports_its_oom_and_is_removed_once_empty(tmp_path: Path) -> None:
    groups = groups_under(tmp_path)
    made = groups.create("j", "t", cpu_millicores=1500, memory_bytes=2**30)
    assert made is not None
    group = made.path
    (group / "memory.events").write_text("oom 1\noom_kill 1\n")
    assert groups.close(made) is True
    assert group.exists()  # its files stand for processes still leaving
    groups.collect(keep=())
    assert group.exists()
    clear(group)
    groups.collect(keep=())
    assert not group.exists()


def test_an_ended_group_without_oom_kills_says_so_and_goes_at_once(tmp_path: Path) -> None:
    groups = groups_under(tmp_path)
    group = tmp_path / "j:t"
    group.mkdir()
    assert groups.close(TaskGroup((group,))) is False and not group.exists()


def kernel_fills(
    monkeypatch: pytest.MonkeyPatch, files_of: Callable[[Path], tuple[str, ...]]
) -> None:
    """A group made under the test's tree gets the interface files ``files_of`` names,
    as the kernel fills a new group with them (empty, but for the kernel's CPU period)."""
    real_mkdir = Path.mkdir

    def mkdir(path: Path, *args: Any, **kwargs: Any) -> None:
        real_mkdir(path, *args, **kwargs)
        for name in files_of(path):
            (path / name).write_text("100000" if name == "cpu.cfs_period_us" else "")

    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_a_task_that_requests_nothing_gets_the_small_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel_fills(monkeypatch, lambda group: ("pids.max",) if group.name == "j:t" else ())
    made = groups_under(tmp_path).create("j", "t", cpu_millicores=None, memory_bytes=None)
    assert made is not None
    assert files(made.path) == {
        "cpu.max": "100000 100000",
        "memory.max": str(2**30),
        "pids.max": "4096",
    }


def test_defaults_are_a_setting(tmp_path: Path) -> None:
    defaults = LimitDefaults(cpu_millicores=250, memory_bytes=2**28, pids=64)
    groups = TaskGroups(
        Isolation(kind=IsolationKind.CGROUP2, reason="test", parent=tmp_path), defaults=defaults
    )
    made = groups.create("j", "t", cpu_millicores=None, memory_bytes=None)
    assert made is not None and files(made.path) == {
        "cpu.max": "25000 100000",
        "memory.max": str(2**28),
    }
    with pytest.raises(ValueError, match="pids must be positive"):
        LimitDefaults(pids=0)


def test_the_first_collect_sweeps_empty_stale_groups_except_the_kept(tmp_path: Path) -> None:
    stale, live, busy = tmp_path / "old:t", tmp_path / "j:live", tmp_path / "j:busy"
    for group in (stale, live, busy):
        group.mkdir()
    (busy / "cgroup.procs").write_text("77\n")
    (tmp_path / "cgroup.procs").write_text("")  # the parent's own files are not groups
    groups = groups_under(tmp_path)
    groups.collect(keep={TaskGroup((live,))})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cgroup.procs", "j:busy", "j:live"]
    later = tmp_path / "later:t"
    later.mkdir()
    groups.collect(keep=())  # sweeps once only: a group made since is not touched
    assert later.exists() and live.exists()


def test_without_cgroups_no_group_is_made_and_nothing_is_swept(tmp_path: Path) -> None:
    groups = TaskGroups(Isolation.rlimit("test"))
    assert groups.create("j", "t", cpu_millicores=1, memory_bytes=1) is None
    groups.collect(keep=())
    assert groups.recorded("/sys/fs/cgroup/x/j:t") is None


def test_only_recorded_groups_under_the_parent_are_managed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    groups = groups_under(tmp_path / "tasks")
    assert groups.recorded(str(tmp_path / "tasks" / "j:t")) == TaskGroup(
        (tmp_path / "tasks" / "j:t",)
    )
    assert groups.recorded("") is None
    with caplog.at_level(logging.WARNING):
        assert groups.recorded("/sys/fs/cgroup/system.slice") is None
    assert "leaving cgroup /sys/fs/cgroup/system.slice alone" in caplog.text


# -- cgroup v1: one group per hierarchy -------------------------------------------------------


def v1_host(tmp_path: Path, *, pids: bool = True) -> TaskGroups:
    names = ("memory", "cpu", "pids") if pids else ("memory", "cpu")
    hierarchies = tuple((name, tmp_path / name) for name in names)
    isolation = Isolation(
        kind=IsolationKind.CGROUP1, reason="test", hierarchies=hierarchies, pids=pids
    )
    return TaskGroups(isolation, scope="s1")


def test_a_v1_task_group_is_one_group_per_hierarchy_under_the_servers_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = v1_host(tmp_path)
    assert groups.parents == (
        tmp_path / "memory" / "phalanx" / "s1",
        tmp_path / "cpu" / "phalanx" / "s1",
        tmp_path / "pids" / "phalanx" / "s1",
    )
    interface = {
        "memory": ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
        "cpu": ("cpu.cfs_quota_us", "cpu.cfs_period_us"),
        "pids": ("pids.max",),
    }
    kernel_fills(
        monkeypatch, lambda group: interface[group.parents[2].name] if group.name == "j:t" else ()
    )
    made = groups.create("j", "t", cpu_millicores=500, memory_bytes=256 * 2**20)
    assert made is not None
    assert made.dirs == tuple(parent / "j:t" for parent in groups.parents)
    assert made.path == groups.parents[0] / "j:t"
    memory, cpu, pids = (files(d) for d in made.dirs)
    assert memory == {
        "memory.limit_in_bytes": str(256 * 2**20),
        "memory.memsw.limit_in_bytes": str(256 * 2**20),  # no swap past the limit
    }
    assert cpu == {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"}
    assert pids == {"pids.max": "4096"}
    assert groups.recorded(str(made.path)) == made  # a restarted server finds all three


def test_a_v1_group_reports_oom_kills_from_oom_control_and_goes_from_every_hierarchy(
    tmp_path: Path,
) -> None:
    groups = v1_host(tmp_path, pids=False)
    made = groups.create("j", "t", cpu_millicores=None, memory_bytes=None)
    assert made is not None and len(made.dirs) == 2
    (made.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert groups.close(made) is True
    clear(made.path)
    groups.collect(keep=())
    assert not any(d.exists() for d in made.dirs)
    groups.release()  # the server's parents go once empty
    assert not (tmp_path / "memory" / "phalanx").exists()
    assert not (tmp_path / "cpu" / "phalanx").exists()


def test_a_v1_group_still_in_use_in_one_hierarchy_leaves_nothing_behind(tmp_path: Path) -> None:
    groups = v1_host(tmp_path)
    busy = groups.parents[1] / "j:t"  # cpu
    busy.mkdir(parents=True)
    (busy / "cgroup.procs").write_text("77\n")
    with pytest.raises(OSError, match="still in use"):
        groups.create("j", "t", cpu_millicores=None, memory_bytes=None)
    assert not (groups.parents[0] / "j:t").exists()  # memory's was made, then removed
