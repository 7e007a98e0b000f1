"""Which isolation this host gives tasks: cgroup v2, else cgroup v1, else rlimits.

``detect`` decides; ``host_isolation`` runs it once per process and logs the verdict
once. The answer is an ``Isolation`` value saying which limits are in force and why, so
that users can see it (the executor exposes it, every task record names it). ``full``
says whether CPU, memory and the number of processes are all limited for a task's whole
process tree.

cgroup v2 is used only when all of this holds, else cgroup v1 is tried
(``phalanx.executors.cgroup1``: a host whose v1 ``cpu`` and ``memory`` hierarchies are
mounted read-write and writable by this user, as root on a hybrid host), else the
answer is ``RLIMIT`` with the first v2 reason that failed and the v1 one:

- a ``cgroup2`` filesystem is mounted read-write (``/proc/self/mountinfo``);
- a *base* group offers the ``cpu`` and ``memory`` controllers (``cgroup.controllers``)
  and this user may write to it. The base is ``$PHALANX_CGROUP_ROOT`` if set (an
  existing group dedicated to this server, e.g. a systemd ``Delegate=yes`` subtree),
  which then is the task groups' parent itself; or else the server's own group
  (``/proc/self/cgroup``), in which the parent ``phalanx-tasks`` is created;
- the base holds no process, or in the default case none but the server (the kernel's
  "no internal processes" rule: a group with processes cannot enable controllers for
  its children). The server then moves itself into a leaf ``phalanx-server`` of its
  group. Detecting again in the same process finds it there and gives the same parent,
  as does a server that starts in that leaf (systemd: ``Delegate=yes`` with
  ``DelegateSubgroup=phalanx-server``, which a restarted service needs, since nothing
  may start in a group whose controllers are enabled for its children).

These checks only read, so a host failing them (no v2, a v1 or hybrid layout, a
read-only mount, no delegation, a shared group) is never written to. Then ``+cpu
+memory`` (and ``+pids`` where the base offers it) is written to the
``cgroup.subtree_control`` of the base and of the parent where not already enabled; a
failure there (reported as the reason) leaves what was done, at worst the server in its
leaf. A hybrid host (controllers bound to cgroup v1, an empty v2 at
``/sys/fs/cgroup/unified``) fails at ``cgroup.controllers`` and goes on to v1.

One server owns one parent: two servers given the same parent could remove each
other's fresh groups.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from phalanx.executors.cgroup1 import detect_v1
from phalanx.executors.cgroupfs import Mount, parse_mountinfo, read_pids, write_value

log = logging.getLogger(__name__)

#: The setting naming a dedicated parent group for the task groups.
CGROUP_ROOT_ENV: Final = "PHALANX_CGROUP_ROOT"
#: Controllers a task group needs, enabled in the parent's ``cgroup.subtree_control``.
CONTROLLERS: Final = ("cpu", "memory")
#: Enabled beside them where the base group offers it: it bounds the task's processes.
OPTIONAL_CONTROLLERS: Final = ("pids",)
#: The leaf the server moves itself into, and the parent of the task groups beside it.
SERVER_LEAF: Final = "phalanx-server"
TASKS_PARENT: Final = "phalanx-tasks"

PROC_SELF: Final = Path("/proc/self")


class IsolationKind(StrEnum):
    """The limits a task runs under."""

    CGROUP2 = "cgroup2"  # cpu.max, memory.max (swap off) and pids.max on the task's own group
    CGROUP1 = "cgroup1"  # a group per task in each v1 hierarchy: cpu, memory (swap off), pids
    RLIMIT = "rlimit"  # RLIMIT_AS from the memory request (CPU tasks only); CPU not enforced


#: The isolations that put every task in a group of its own.
GROUPED: Final = frozenset({IsolationKind.CGROUP2, IsolationKind.CGROUP1})


@dataclass(frozen=True, slots=True, kw_only=True)
class Isolation:
    """The isolation in force for this server's tasks, and why.

    ``parent`` is the group under which task groups are created, for ``CGROUP2`` only.
    ``hierarchies`` are the mount points of the v1 controllers, for ``CGROUP1`` only:
    ``(controller, mount point)`` for ``cpu`` and ``memory``, and ``pids`` where there
    is one (each server makes its parent groups below them: ``cgroup1.parents``).
    ``pids`` is True when every task group also gets a ``pids.max``.
    """

    kind: IsolationKind
    reason: str
    parent: Path | None = None
    hierarchies: tuple[tuple[str, Path], ...] = ()
    pids: bool = False

    def __post_init__(self) -> None:
        if (self.kind is IsolationKind.CGROUP2) != (self.parent is not None):
            raise ValueError("a parent group is given exactly for cgroup2 isolation")
        names = {name for name, _ in self.hierarchies}
        if (self.kind is IsolationKind.CGROUP1) != bool(names):
            raise ValueError("v1 hierarchies are given exactly for cgroup1 isolation")
        if names and not {"cpu", "memory"} <= names:
            raise ValueError("cgroup1 isolation needs the cpu and memory hierarchies")
        if self.pids and self.kind not in GROUPED:
            raise ValueError("only cgroup isolation limits the number of processes")

    @classmethod
    def rlimit(cls, reason: str) -> Isolation:
        """Fall back to rlimits because of ``reason``."""
        return cls(kind=IsolationKind.RLIMIT, reason=reason)

    @property
    def full(self) -> bool:
        """True when CPU, memory and processes are all limited for a task's whole tree."""
        return self.kind in GROUPED and self.pids

    def describe(self) -> str:
        """One line for people: what is enforced, and why."""
        pids = " and pids.max" if self.pids else " (processes not limited)"
        if self.kind is IsolationKind.CGROUP2:
            return (
                f"cgroup2: cpu.max, memory.max{pids} per task under {self.parent} ({self.reason})"
            )
        if self.kind is IsolationKind.CGROUP1:
            where = ", ".join(str(point) for _, point in self.hierarchies)
            return (
                f"cgroup1: cpu.cfs_quota_us, memory.limit_in_bytes{pids} per task, "
                f"in {where} ({self.reason})"
            )
        return (
            "rlimit: RLIMIT_AS from the memory request, CPU and processes not limited "
            f"({self.reason})"
        )


def own_group(proc_cgroup: str) -> str | None:
    """This process's cgroup v2 path (the ``0::`` line of ``/proc/self/cgroup``), if any."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def detect(
    configured: Path | None = None, *, proc: Path = PROC_SELF, pid: int | None = None
) -> Isolation:
    """The isolation this process can give its tasks (see the module docstring).

    ``configured`` is the dedicated parent group (``$PHALANX_CGROUP_ROOT``); ``proc``
    is where ``mountinfo`` and ``cgroup`` are read; ``pid`` is the server (this process).
    """
    try:
        mounts = parse_mountinfo((proc / "mountinfo").read_text())
        own = own_group((proc / "cgroup").read_text())
    except OSError as error:
        return Isolation.rlimit(f"cannot read {proc}: {error.strerror}")
    pid = os.getpid() if pid is None else pid
    if configured is not None:
        return _configured(configured, mounts)
    isolation = _delegated(own, mounts, pid)
    if isolation.kind is not IsolationKind.RLIMIT:
        return isolation
    v1 = detect_v1(mounts)
    if isinstance(v1, str):
        return Isolation.rlimit(f"{isolation.reason}; cgroup v1: {v1}")
    hierarchies, pids = v1
    return Isolation(
        kind=IsolationKind.CGROUP1,
        hierarchies=hierarchies,
        pids=pids,
        reason=f"{isolation.reason}; the v1 hierarchies are writable",
    )


@functools.cache
def _host_isolation(configured: str | None) -> Isolation:
    isolation = detect(Path(configured) if configured else None)
    level = (
        logging.WARNING if configured and isolation.kind is IsolationKind.RLIMIT else logging.INFO
    )
    log.log(level, "task isolation: %s", isolation.describe())
    return isolation


def host_isolation() -> Isolation:
    """This host's isolation for ``$PHALANX_CGROUP_ROOT``, detected and logged once per process.

    The log line is INFO, or WARNING when an explicitly configured parent is unusable (a
    server says at WARNING when its isolation is not ``full``: ``control.server``).
    """
    return _host_isolation(os.environ.get(CGROUP_ROOT_ENV) or None)


# -- the two ways to a parent ---------------------------------------------------------------


def _configured(root: Path, mounts: list[Mount]) -> Isolation:
    where = f"{CGROUP_ROOT_ENV}={root}"
    if not root.is_absolute():
        return Isolation.rlimit(f"{where} is not an absolute path")
    mount = max(
        (m for m in mounts if m.fstype == "cgroup2" and root.is_relative_to(m.point)),
        key=lambda m: len(m.point.parts),
        default=None,
    )
    if mount is None:
        return Isolation.rlimit(f"{where} is not on a cgroup2 filesystem")
    if mount.read_only:
        return Isolation.rlimit(f"{where}: cgroup2 at {mount.point} is mounted read-only")
    if not (root / "cgroup.controllers").is_file():
        return Isolation.rlimit(f"{where} is not an existing cgroup")
    why = _unusable(root, mounts) or _not_empty(root, allowed=None) or _enable(root)
    if why:
        return Isolation.rlimit(f"{where}: {why}")
    return Isolation(kind=IsolationKind.CGROUP2, parent=root, reason=where, pids=_has_pids(root))


def _delegated(own: str | None, mounts: list[Mount], pid: int) -> Isolation:
    v2 = [m for m in mounts if m.fstype == "cgroup2"]
    if not v2:
        return Isolation.rlimit("no cgroup2 filesystem is mounted (a cgroup v1 host)")
    if own is None:
        return Isolation.rlimit("this process is in no cgroup v2 group")
    seen = [(m, m.point / Path(own).relative_to(m.root)) for m in v2 if _under(own, m.root)]
    if not seen:
        return Isolation.rlimit(f"this process's group {own} is not visible in any cgroup2 mount")
    writable = [(m, group) for m, group in seen if not m.read_only]
    if not writable:
        return Isolation.rlimit(f"cgroup2 at {seen[0][0].point} is mounted read-only")
    group = writable[0][1]
    if group.name == SERVER_LEAF:
        group = group.parent  # moved there by an earlier detect in this process
    why = _unusable(group, mounts) or _not_empty(group, allowed=pid)
    why = why or _move_into_leaf(group, pid) or _enable(group)
    tasks = group / TASKS_PARENT
    why = why or _make_group(tasks) or _enable(tasks)
    if why:
        return Isolation.rlimit(why)
    return Isolation(
        kind=IsolationKind.CGROUP2,
        parent=tasks,
        reason=f"delegated in the server's group {group}, server in {SERVER_LEAF}",
        pids=_has_pids(tasks),
    )


# -- checks (reason or None) and the few writes ---------------------------------------------


def _unusable(group: Path, mounts: list[Mount]) -> str | None:
    try:
        offered = (group / "cgroup.controllers").read_text().split()
    except OSError as error:
        return f"cannot read {group}/cgroup.controllers: {error.strerror}"
    missing = [name for name in CONTROLLERS if name not in offered]
    if missing:
        v1 = [
            name
            for name in missing
            if any(name in m.options for m in mounts if m.fstype == "cgroup")
        ]
        # No parentheses: ``describe`` puts the whole reason in a pair of its own.
        hint = f", as {', '.join(v1)} belong to cgroup v1 on this hybrid host" if v1 else ""
        return f"cgroup v2 group {group} does not offer {', '.join(missing)}{hint}"
    for path in (group, group / "cgroup.subtree_control", group / "cgroup.procs"):
        if not os.access(path, os.W_OK):
            return f"{path} is not writable by uid {os.getuid()} (no delegation)"
    return None


def _not_empty(group: Path, *, allowed: int | None) -> str | None:
    if _enabled(group):
        return None  # the kernel already keeps processes out of it
    others = [pid for pid in read_pids(group) if pid != allowed]
    if not others:
        return None
    return (
        f"{group} holds {len(others)} other process(es), so it cannot enable controllers for "
        f"children (no internal processes); set {CGROUP_ROOT_ENV} to an empty delegated group"
    )


def _enabled(group: Path) -> bool:
    """True when the group gives its children every controller it should (see ``_wanted``)."""
    try:
        enabled = _words(group / "cgroup.subtree_control")
    except OSError:
        return False
    return all(name.lstrip("+") in enabled for name in _wanted(group))


def _wanted(group: Path) -> list[str]:
    """``CONTROLLERS``, and the ``OPTIONAL_CONTROLLERS`` the group offers."""
    try:
        offered = _words(group / "cgroup.controllers")
    except OSError:
        offered = set()
    return [*CONTROLLERS, *(name for name in OPTIONAL_CONTROLLERS if name in offered)]


def _has_pids(parent: Path) -> bool:
    """True when the task groups made in ``parent`` get ``pids.max``."""
    try:
        return "pids" in _words(parent / "cgroup.subtree_control")
    except OSError:
        return False


def _words(path: Path) -> set[str]:
    # The kernel shows "cpu memory"; a file written by hand may hold "+cpu +memory".
    return {word.lstrip("+") for word in path.read_text().split()}


def _move_into_leaf(group: Path, pid: int) -> str | None:
    if pid not in read_pids(group):
        return None
    leaf = group / SERVER_LEAF
    return _make_group(leaf) or _write_or_reason(leaf / "cgroup.procs", str(pid))


def _make_group(group: Path) -> str | None:
    try:
        group.mkdir(exist_ok=True)
    except OSError as error:
        return f"cannot create {group}: {error.strerror}"
    return None


def _enable(group: Path) -> str | None:
    if _enabled(group):
        return None
    wanted = " ".join(f"+{name}" for name in _wanted(group))
    return _write_or_reason(group / "cgroup.subtree_control", wanted)


def _write_or_reason(path: Path, value: str) -> str | None:
    try:
        write_value(path, value)
    except OSError as error:
        why = f"cannot write {value!r} to {path}: {error.strerror}"
        if error.errno == errno.EBUSY and path.name == "cgroup.subtree_control":
            why += " (the group holds processes: no internal processes)"
        return why
    return None


def _under(path: str, root: str) -> bool:
    return root in {"/", path} or path.startswith(root.rstrip("/") + "/")
