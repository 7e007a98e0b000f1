"""Isolation on this very host: its real /proc and /sys/fs/cgroup, real tasks.

Which tests run depends on the host. Where cgroup v2 cannot limit CPU and memory (no v2
mount, or a hybrid layout whose v2 lacks the controllers: most CI machines), detection
must say so, and use the v1 hierarchies where they are writable (as root), else keep
tasks' RLIMIT_AS. Where v2 or v1 is usable, the end-to-end tests check a real task's
groups; elsewhere they are skipped with detection's own reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from phalanx.executors.base import OOM_KILLED
from phalanx.executors.cgroups import (
    IsolationKind,
    detect,
    host_isolation,
    own_group,
    parse_mountinfo,
)
from tests.integration.executors.harness import Harness, wait_for

WAITS_FOR_GO = (
    "cat /proc/self/cgroup > cgroup; ulimit -v > limit; touch ready; "
    "while [ ! -e go ]; do sleep 0.01; done; exit 5"
)


def v2_shortfall() -> str | None:
    """Read without phalanx's code: why this host's cgroup v2 cannot limit CPU and memory
    for this process's group (None when it offers both)."""
    mounts = [
        line.split(" - ")[0].split()
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if " - cgroup2 " in line
    ]
    if not mounts:
        return "no cgroup2 filesystem is mounted"
    own = next(
        line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line[:3] == "0::"
    )
    root, point = mounts[0][3], Path(mounts[0][4])
    group = point / Path(own).relative_to(root)
    offered = (group / "cgroup.controllers").read_text().split()
    missing = [name for name in ("cpu", "memory") if name not in offered]
    return f"does not offer {', '.join(missing)}" if missing else None


def test_detection_falls_back_where_cgroup_v2_cannot_limit_cpu_and_memory() -> None:
    shortfall = v2_shortfall()
    if shortfall is None:
        pytest.skip("this host's cgroup v2 offers cpu and memory: the end-to-end test covers it")
    isolation = detect()  # reads only: a host without usable v2 is never written to
    assert isolation.kind in (IsolationKind.CGROUP1, IsolationKind.RLIMIT)
    assert isolation.parent is None and shortfall in isolation.reason


def test_a_real_task_keeps_its_rlimit_as_under_the_host_fallback(tmp_path: Path) -> None:
    if (isolation := host_isolation()).kind is not IsolationKind.RLIMIT:
        pytest.skip(f"this host isolates with cgroups: {isolation.describe()}")
    harness = Harness(tmp_path / "data")  # the host's own isolation
    launch = harness.launch(command="ulimit -v > limit", memory_bytes=512 * 2**20)
    harness.start(launch)
    harness.wait_event("t0")
    assert harness.wait_file(launch, "limit").strip() == str(512 * 1024)
    assert harness.executor.isolation is isolation


def writable_v2() -> Path:
    """The host's task parent under cgroup v2; skips the test where there is none."""
    isolation = host_isolation()
    if isolation.parent is None:
        pytest.skip(f"no writable cgroup v2 hierarchy here: {isolation.reason}")
    return isolation.parent


def test_a_real_task_runs_in_its_own_cgroup_with_the_requested_limits(tmp_path: Path) -> None:
    group = writable_v2() / "job:t0"
    harness = Harness(tmp_path / "data")
    try:
        launch = harness.launch(command=WAITS_FOR_GO, cpu_millicores=1500, memory_bytes=2**28)
        harness.start(launch)
        harness.wait_file(launch, "ready")
        mount = max(
            (m for m in parse_mountinfo(Path("/proc/self/mountinfo").read_text())
             if m.fstype == "cgroup2" and group.is_relative_to(m.point)),
            key=lambda m: len(m.point.parts),
        )  # fmt: skip
        seen = own_group(harness.wait_file(launch, "cgroup"))
        assert seen == str(Path(mount.root) / group.relative_to(mount.point))
        assert (group / "cpu.max").read_text() == "150000 100000\n"
        assert (group / "memory.max").read_text() == f"{2**28}\n"
        if (group / "memory.swap.max").exists():
            assert (group / "memory.swap.max").read_text() == "0\n"
        assert harness.wait_file(launch, "limit").strip() == "unlimited"
        (harness.workdir(launch) / "go").touch()
        event = harness.wait_event("t0")
        assert (event.exit_code, event.reason) == (5, None)
        wait_for(lambda: harness.poll() == [] and not group.exists(), "the group to be removed")
    finally:
        harness.close()


def test_a_real_task_over_its_memory_limit_is_oom_killed(tmp_path: Path) -> None:
    parent = writable_v2()
    swaps = Path("/proc/swaps").read_text().splitlines()[1:]
    if swaps and not (parent / "memory.swap.max").exists():
        pytest.skip("swap is on but not accounted: the task would swap instead of being killed")
    harness = Harness(tmp_path / "data")
    try:
        hog = (sys.executable, "-c", "x = b'x' * (512 * 2**20)")
        harness.start(harness.launch(command=hog, memory_bytes=64 * 2**20))
        event = harness.wait_event("t0")
        assert (event.exit_code, event.reason) == (137, OOM_KILLED)
    finally:
        harness.close()


def writable_v1(tmp_path: Path) -> Harness:
    """An executor on the host's own v1 hierarchies; skips the test where there are none."""
    isolation = host_isolation()
    if isolation.kind is not IsolationKind.CGROUP1:
        pytest.skip(f"no writable cgroup v1 hierarchies here: {isolation.describe()}")
    return Harness(tmp_path / "data")


def test_a_real_task_runs_in_its_own_v1_groups_with_its_limits(tmp_path: Path) -> None:
    harness = writable_v1(tmp_path)
    try:
        launch = harness.launch(command=WAITS_FOR_GO, cpu_millicores=1500, memory_bytes=2**28)
        harness.start(launch)
        harness.wait_file(launch, "ready")
        [record] = harness.executor.records()
        memory = Path(record.cgroup)
        assert record.isolation is IsolationKind.CGROUP1
        groups = {point.name: point / memory.relative_to(Path("/sys/fs/cgroup/memory"))
                  for point in (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/cpu"))}  # fmt: skip
        seen = dict(
            line.split(":", 2)[1:] for line in harness.wait_file(launch, "cgroup").splitlines()
        )
        # The command's own /proc/self/cgroup: inside the task's group in each hierarchy.
        assert seen["memory"] == "/" + str(memory.relative_to("/sys/fs/cgroup/memory"))
        assert seen["cpu"] == seen["memory"] and seen["pids"] == seen["memory"]
        assert (groups["memory"] / "memory.limit_in_bytes").read_text() == f"{2**28}\n"
        assert (groups["cpu"] / "cpu.cfs_quota_us").read_text() == "150000\n"
        assert (groups["cpu"] / "cpu.cfs_period_us").read_text() == "100000\n"
        pids = Path("/sys/fs/cgroup/pids") / seen["pids"].lstrip("/")
        assert (pids / "pids.max").read_text() == "4096\n"  # the default: never unlimited
        assert harness.wait_file(launch, "limit").strip() == "unlimited"
        (harness.workdir(launch) / "go").touch()
        event = harness.wait_event("t0")
        assert (event.exit_code, event.reason) == (5, None)
        wait_for(
            lambda: harness.poll() == [] and not any(g.exists() for g in (*groups.values(), pids)),
            "the groups to be removed",
        )
    finally:
        harness.close()


def test_a_real_task_whose_processes_together_pass_its_v1_memory_limit_is_oom_killed(
    tmp_path: Path,
) -> None:
    harness = writable_v1(tmp_path)
    try:
        # Each child stays far below the limit; together they pass it.
        child = "import time; x = b'x' * (48 * 2**20); time.sleep(3)"
        script = (
            "import subprocess, sys; "
            f"kids = [subprocess.Popen([sys.executable, '-c', {child!r}]) for _ in range(4)]; "
            "sys.exit(max(abs(k.wait()) for k in kids))"
        )
        harness.start(harness.launch(command=(sys.executable, "-c", script), memory_bytes=2**27))
        event = harness.wait_event("t0")
        assert (event.exit_code, event.reason) == (9, OOM_KILLED)
    finally:
        harness.close()
