"""cgroup v2 detection against a temporary directory laid out like a cgroup2 tree.

A fake ``proc`` directory holds ``mountinfo`` (naming the temporary tree as a cgroup2
mount) and ``cgroup``; the tree holds the interface files detection reads. Files the
code writes keep exactly what was written (the kernel would show ``+cpu +memory`` in
``cgroup.subtree_control`` as ``cpu memory``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.executors import cgroup1, cgroups
from phalanx.executors.cgroups import (
    CGROUP_ROOT_ENV,
    Isolation,
    IsolationKind,
    detect,
    host_isolation,
    own_group,
    parse_mountinfo,
)

SERVER = 4242
#: Why a fake host with no v1 mounts has no cgroup v1 either.
NO_V1 = "no memory hierarchy is mounted"
V1_LINES = (
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
)

#: A v1 host whose hierarchies are not there (the real ones would be usable as root).
V1_NOWHERE = V1_LINES.replace("/sys/fs/cgroup", "/nonexistent")


def group(path: Path, *, controllers: str, procs: str = "", enabled: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.controllers").write_text(controllers + "\n")
    (path / "cgroup.subtree_control").write_text(enabled + "\n" if enabled else "")
    (path / "cgroup.procs").write_text(procs)
    return path


class Host:
    """A fake host: ``proc/`` and a cgroup2 tree mounted at ``cg/``, the server in ``cg/svc``."""

    def __init__(self, tmp: Path, *, mount_options: str = "rw", extra_mounts: str = "") -> None:
        self.proc = tmp / "proc"
        self.proc.mkdir()
        self.mount = tmp / "cg"
        group(self.mount, controllers="cpuset cpu io memory pids", enabled="cpu memory pids")
        self.svc = group(self.mount / "svc", controllers="cpu memory pids", procs=f"{SERVER}\n")
        self.mountinfo(f"41 23 0:38 / {self.mount} {mount_options} - cgroup2 cgroup2 rw\n")
        (self.proc / "mountinfo").write_text(extra_mounts + (self.proc / "mountinfo").read_text())
        self.in_group("/svc")

    def mountinfo(self, text: str) -> None:
        (self.proc / "mountinfo").write_text(text)

    def in_group(self, path: str) -> None:
        (self.proc / "cgroup").write_text(f"1:name=systemd:/x\n0::{path}\n")

    def detect(self, configured: Path | None = None) -> Isolation:
        return detect(configured, proc=self.proc, pid=SERVER)


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> content): what detection left there."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def test_the_server_moves_into_a_leaf_and_tasks_get_a_parent_with_cpu_and_memory(
    host: Host,
) -> None:
    before = tree(host.mount)
    isolation = host.detect()
    assert (isolation.kind, isolation.parent) == (IsolationKind.CGROUP2, host.svc / "phalanx-tasks")
    written = {k: v for k, v in tree(host.mount).items() if before.get(k) != v}
    assert written == {
        "svc/phalanx-server/cgroup.procs": str(SERVER),
        "svc/cgroup.subtree_control": "+cpu +memory +pids",  # pids too: svc offers it
        # A plain directory lists no controllers; the kernel would offer pids here too.
        "svc/phalanx-tasks/cgroup.subtree_control": "+cpu +memory",
    }
    assert "svc" in isolation.reason and isolation.describe().startswith("cgroup2:")
    assert not isolation.pids and not isolation.full  # phalanx-tasks gives no pids


def test_pids_are_limited_where_the_task_parent_offers_the_controller(host: Host) -> None:
    group(host.svc / "phalanx-tasks", controllers="cpu memory pids")
    isolation = host.detect()
    assert (isolation.pids, isolation.full) == (True, True)
    assert (host.svc / "phalanx-tasks" / "cgroup.subtree_control").read_text() == (
        "+cpu +memory +pids"
    )
    assert "memory.max and pids.max per task" in isolation.describe()


def test_detecting_again_from_the_leaf_reuses_the_same_parent(host: Host) -> None:
    first = host.detect()
    # What the kernel shows once the server moved and the controllers are on.
    (host.svc / "cgroup.procs").write_text("")
    (host.svc / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (host.svc / "phalanx-tasks" / "cgroup.subtree_control").write_text("cpu memory\n")
    host.in_group("/svc/phalanx-server")
    before = tree(host.mount)
    assert host.detect() == first
    assert tree(host.mount) == before  # nothing more written, no leaf in the leaf


def test_a_group_shared_with_other_processes_is_left_untouched(host: Host) -> None:
    (host.svc / "cgroup.procs").write_text(f"{SERVER}\n77\n")
    before = tree(host.mount)
    isolation = host.detect()
    assert isolation.kind is IsolationKind.RLIMIT and isolation.parent is None
    assert "holds 1 other process" in isolation.reason and CGROUP_ROOT_ENV in isolation.reason
    assert tree(host.mount) == before and not (host.svc / "phalanx-server").exists()


def v1_tree(tmp: Path, *controllers: str) -> str:
    """v1 hierarchies under ``tmp`` for ``controllers`` (their probe files in place);
    the mountinfo lines naming them."""
    probes = {"cpu": "cpu.cfs_quota_us", "memory": "memory.limit_in_bytes", "pids": "tasks"}
    lines = []
    for number, name in enumerate(controllers):
        point = tmp / "v1" / name
        point.mkdir(parents=True)
        (point / probes[name]).write_text("")
        lines.append(
            f"{50 + number} 31 0:{60 + number} / {point} rw,relatime - cgroup cgroup rw,{name}\n"
        )
    return "".join(lines)


def hybrid(tmp_path: Path, *controllers: str) -> Host:
    host = Host(tmp_path, extra_mounts=v1_tree(tmp_path, *controllers))
    (host.mount / "cgroup.controllers").write_text("hugetlb\n")  # as /sys/fs/cgroup/unified
    host.in_group("/")
    return host


V2_ON_A_HYBRID = (
    "does not offer cpu, memory, as cpu, memory belong to cgroup v1 on this hybrid host"
)


def test_a_hybrid_host_isolates_with_its_v1_hierarchies_and_writes_nothing(tmp_path: Path) -> None:
    host = hybrid(tmp_path, "cpu", "memory", "pids")
    before = tree(tmp_path)
    isolation = host.detect()
    v1 = tmp_path / "v1"
    assert isolation.kind is IsolationKind.CGROUP1 and isolation.parent is None
    assert isolation.hierarchies == (
        ("memory", v1 / "memory"),
        ("cpu", v1 / "cpu"),
        ("pids", v1 / "pids"),
    )
    assert (isolation.pids, isolation.full) == (True, True)
    assert isolation.reason.startswith(f"cgroup v2 group {host.mount} {V2_ON_A_HYBRID}")
    assert isolation.reason.endswith("; the v1 hierarchies are writable")
    assert tree(tmp_path) == before  # detection reads; the executor makes its groups
    assert isolation.describe().startswith(
        "cgroup1: cpu.cfs_quota_us, memory.limit_in_bytes and pids.max per task"
    )
    assert_one_level_of_parentheses(isolation.describe())  # describe node's Limits line


def assert_one_level_of_parentheses(text: str) -> None:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        assert depth in (0, 1), text
    assert depth == 0, text


def test_v1_without_pids_limits_cpu_and_memory_but_is_not_full(tmp_path: Path) -> None:
    isolation = hybrid(tmp_path, "cpu", "memory").detect()
    assert isolation.kind is IsolationKind.CGROUP1
    assert (isolation.pids, isolation.full) == (False, False)
    assert "(processes not limited)" in isolation.describe()
    assert_one_level_of_parentheses(isolation.describe())


def test_a_hybrid_host_whose_v1_is_not_writable_falls_back_to_rlimits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = hybrid(tmp_path, "cpu", "memory")
    # Root passes every permission check, so the kernel's answer is stood in for.
    monkeypatch.setattr(cgroup1.os, "access", lambda path, mode: False)
    isolation = host.detect()
    assert isolation.kind is IsolationKind.RLIMIT
    assert isolation.reason == (
        f"cgroup v2 group {host.mount} {V2_ON_A_HYBRID}; cgroup v1: "
        f"{tmp_path / 'v1' / 'memory'} is not writable by uid {os.getuid()} (run phalanx up as root)"
    )
    assert isolation.describe().startswith("rlimit: RLIMIT_AS from the memory request")
    assert not isolation.full


def test_v1_needs_both_cpu_and_memory(tmp_path: Path) -> None:
    isolation = hybrid(tmp_path, "cpu").detect()
    assert isolation.kind is IsolationKind.RLIMIT
    assert isolation.reason.endswith("; cgroup v1: no memory hierarchy is mounted")


def test_a_group_without_the_memory_controller_is_not_usable(host: Host) -> None:
    (host.svc / "cgroup.controllers").write_text("cpu pids\n")
    isolation = host.detect()
    assert isolation.reason == (
        f"cgroup v2 group {host.svc} does not offer memory; cgroup v1: {NO_V1}"
    )


@pytest.mark.parametrize(
    ("mountinfo", "cgroup", "reason"),
    [
        (V1_NOWHERE, "0::/svc", "no cgroup2 filesystem is mounted (a cgroup v1 host)"),
        (None, "1:cpu:/\n", "this process is in no cgroup v2 group"),
    ],
)
def test_no_mount_or_no_own_group_falls_back(
    host: Host, mountinfo: str | None, cgroup: str, reason: str
) -> None:
    if mountinfo is not None:
        host.mountinfo(mountinfo)
    (host.proc / "cgroup").write_text(cgroup)
    assert host.detect().reason.startswith(reason + "; cgroup v1: ")


def test_a_group_outside_the_mounted_subtree_is_not_visible(host: Host) -> None:
    host.mountinfo(f"41 23 0:38 /other {host.mount} rw - cgroup2 cgroup2 rw\n")
    isolation = host.detect()
    assert isolation.reason == (
        f"this process's group /svc is not visible in any cgroup2 mount; cgroup v1: {NO_V1}"
    )


def test_a_namespaced_mount_maps_the_group_below_its_mount_point(host: Host) -> None:
    # A mount of the subtree /svc shows that group at the mount point itself.
    host.mountinfo(f"41 23 0:38 /svc {host.svc} rw - cgroup2 cgroup2 rw\n")
    host.in_group("/svc")
    assert host.detect().parent == host.svc / "phalanx-tasks"


def test_a_read_only_mount_is_not_usable(tmp_path: Path) -> None:
    host = Host(tmp_path, mount_options="ro,nosuid")
    isolation = host.detect()
    assert isolation.reason == f"cgroup2 at {host.mount} is mounted read-only; cgroup v1: {NO_V1}"


def test_a_group_this_user_cannot_write_is_not_delegated(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root passes every permission check, so the kernel's answer is stood in for.
    monkeypatch.setattr(cgroups.os, "access", lambda path, mode: False)
    isolation = host.detect()
    assert isolation.kind is IsolationKind.RLIMIT and "(no delegation)" in isolation.reason
    assert not (host.svc / "phalanx-server").exists()


def test_a_configured_empty_group_becomes_the_parent_as_it_is(host: Host) -> None:
    dedicated = group(host.mount / "delegated", controllers="cpu memory")
    before = tree(host.mount)
    isolation = host.detect(dedicated)
    assert (isolation.kind, isolation.parent) == (IsolationKind.CGROUP2, dedicated)
    assert isolation.reason == f"{CGROUP_ROOT_ENV}={dedicated}"
    written = {k: v for k, v in tree(host.mount).items() if before.get(k) != v}
    assert written == {"delegated/cgroup.subtree_control": "+cpu +memory"}


def test_a_configured_group_with_controllers_already_on_is_not_written(host: Host) -> None:
    dedicated = group(host.mount / "d", controllers="cpu memory", enabled="cpu memory")
    before = tree(host.mount)
    assert host.detect(dedicated).parent == dedicated
    assert tree(host.mount) == before


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda h: group(h.mount / "d", controllers="cpu memory", procs="9\n"), "holds 1 other"),
        (lambda h: group(h.mount / "d", controllers="cpu"), "does not offer memory"),
        (lambda h: h.mount / "missing", "is not an existing cgroup"),
        (lambda h: h.proc, "is not on a cgroup2 filesystem"),
        (lambda h: Path("relative/group"), "is not an absolute path"),
    ],
)
def test_an_unusable_configured_group_falls_back_naming_the_setting(
    host: Host, setup: object, reason: str
) -> None:
    assert callable(setup)
    configured: Path = setup(host)
    isolation = host.detect(configured)
    assert isolation.kind is IsolationKind.RLIMIT
    assert isolation.reason.startswith(f"{CGROUP_ROOT_ENV}={configured}")
    assert reason in isolation.reason


def test_mountinfo_parsing_unescapes_paths_and_reads_both_option_fields() -> None:
    mounts = parse_mountinfo(
        "41 23 0:38 /a\\040b /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 ro,nsdelegate\n"
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" + V1_LINES
    )
    assert [(str(m.point), m.root, m.fstype, m.read_only) for m in mounts] == [
        ("/sys/fs/cgroup", "/a b", "cgroup2", True),
        ("/sys/fs/cgroup/cpu", "/", "cgroup", False),
        ("/sys/fs/cgroup/memory", "/", "cgroup", False),
    ]
    assert {"cpu", "cpuacct"} <= mounts[1].options


def test_own_group_is_the_unified_line() -> None:
    assert own_group("4:memory:/a\n0::/user.slice/x.service\n") == "/user.slice/x.service"
    assert own_group("4:memory:/a\n") is None


def test_only_cgroup2_isolation_has_a_parent() -> None:
    with pytest.raises(ValueError, match="parent"):
        Isolation(kind=IsolationKind.CGROUP2, reason="x")
    with pytest.raises(ValueError, match="parent"):
        Isolation(kind=IsolationKind.RLIMIT, reason="x", parent=Path("/p"))


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    cgroups._host_isolation.cache_clear()
    yield
    cgroups._host_isolation.cache_clear()


@pytest.mark.usefixtures("fresh_cache")
def test_the_host_verdict_is_detected_and_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(CGROUP_ROOT_ENV, str(tmp_path))  # not a cgroup anywhere
    with caplog.at_level(logging.INFO, logger=cgroups.__name__):
        first, second = host_isolation(), host_isolation()
    assert first is second and first.kind is IsolationKind.RLIMIT
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, f"task isolation: {first.describe()}")
    ]
    assert "is not on a cgroup2 filesystem" in first.reason
