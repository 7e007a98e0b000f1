"""One cgroup v2 group per task: its limits, its end, its removal.

Guarantees, under ``cgroups.IsolationKind.CGROUP2``:

- a task's group is ``<parent>/<job>:<task>`` (see ``group_name``), created fresh for
  each run with ``cpu.max`` from the CPU request, ``memory.max`` from the memory request
  and ``memory.swap.max`` 0 (where swap is accounted), all written before the task's
  wrapper starts. Unrequested limits are written as ``max``. ``pids.max`` is left alone:
  a task asks for no process count, and threads count against it;
- the wrapper joins the group before it runs the command (``process.WRAPPER_SCRIPT``),
  so everything the command forks is inside, whatever session or process group it makes;
- when the task ends, what is left in the group is killed, the kernel's count of OOM
  kills in it tells whether memory ran out, and the group is removed: at once, or by a
  later ``collect`` once the killed processes are gone. A group this executor did not
  create or adopt is only removed by the startup sweep, and only if it is empty.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import signal
from collections.abc import Collection
from pathlib import Path
from typing import Final

from phalanx.executors.cgroups import Isolation, read_pids, write_value

log = logging.getLogger(__name__)

#: ``cpu.max`` period in microseconds (the kernel's default) and the smallest quota it takes.
CPU_PERIOD_US: Final = 100_000
CPU_MIN_QUOTA_US: Final = 1_000
#: Longest directory name the kernel accepts, in bytes.
NAME_MAX: Final = 255


def group_name(job: str, task: str) -> str:
    """``<job>:<task>``, with ``%`` and ``:`` in either escaped (``%25``, ``%3A``).

    Distinct tasks get distinct names, and no name can be an interface file's (those
    have no ``:``). A name over 255 bytes is cut and ends in a hash of the whole.
    """
    name = f"{_escape(job)}:{_escape(task)}"
    if len(name.encode()) <= NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return name.encode()[: NAME_MAX - 17].decode(errors="ignore") + "~" + digest


def cpu_max(millicores: int | None) -> str:
    """The ``cpu.max`` line for a CPU request: 1500m -> ``150000 100000``; None -> ``max``."""
    if millicores is None:
        return f"max {CPU_PERIOD_US}"
    quota = max(CPU_MIN_QUOTA_US, millicores * CPU_PERIOD_US // 1000)
    return f"{quota} {CPU_PERIOD_US}"


def create_group(
    parent: Path, name: str, *, cpu_millicores: int | None, memory_bytes: int | None
) -> Path:
    """A fresh group ``parent/name`` with the task's limits written; returns its path.

    An empty group left from an earlier run is replaced (its OOM count must not be read
    as this run's). Raises ``OSError`` when the group cannot be made or is still in use;
    nothing is left behind then.
    """
    group = parent / name
    try:
        group.mkdir()
    except FileExistsError:
        if not remove_group(group):
            raise OSError(
                errno.EBUSY, f"cgroup {group} is still in use by an earlier run"
            ) from None
        group.mkdir()
    try:
        write_value(group / "cpu.max", cpu_max(cpu_millicores))
        write_value(group / "memory.max", "max" if memory_bytes is None else str(memory_bytes))
        # A sibling has memory.swap.max exactly when the parent has: swap is accounted.
        if (parent / "memory.swap.max").exists():
            write_value(group / "memory.swap.max", "max" if memory_bytes is None else "0")
    except OSError:
        remove_group(group)
        raise
    return group


def oom_kills(group: Path) -> int:
    """How many processes the kernel OOM-killed in ``group`` (``memory.events``); 0 if unknown."""
    try:
        lines = (group / "memory.events").read_text().splitlines()
    except OSError:
        return 0
    counts = dict(line.split(maxsplit=1) for line in lines if " " in line)
    value = counts.get("oom_kill", "0").strip()
    return int(value) if value.isdigit() else 0


def populated(group: Path) -> bool:
    """True while a process is in ``group`` or below (``cgroup.events``); False when it is gone."""
    try:
        lines = (group / "cgroup.events").read_text().splitlines()
    except OSError:
        return False
    return "populated 1" in lines


def kill_members(group: Path) -> None:
    """SIGKILL every process in ``group``: through ``cgroup.kill`` where the kernel has it."""
    if not populated(group):
        return
    if (group / "cgroup.kill").exists():
        write_value(group / "cgroup.kill", "1")
        return
    for pid in read_pids(group):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def remove_group(group: Path) -> bool:
    """Remove ``group``; True when it is gone, False while processes or children keep it."""
    try:
        os.rmdir(group)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class TaskGroups:
    """The task groups of one executor (a mutable holder: it remembers removals to retry)."""

    __slots__ = ("_retired", "_swept", "isolation")

    def __init__(self, isolation: Isolation) -> None:
        self.isolation = isolation
        self._retired: set[Path] = set()
        self._swept = False

    def create(
        self, job: str, task: str, *, cpu_millicores: int | None, memory_bytes: int | None
    ) -> Path | None:
        """The task's fresh group with its limits, or None without cgroup isolation."""
        parent = self.isolation.parent
        if parent is None:
            return None
        return create_group(
            parent,
            group_name(job, task),
            cpu_millicores=cpu_millicores,
            memory_bytes=memory_bytes,
        )

    def recorded(self, cgroup: str) -> Path | None:
        """The group a task record names, if this executor manages it: one under its
        parent. Any other is left alone (a changed setting, or a record not ours)."""
        if not cgroup:
            return None
        group = Path(cgroup)
        if self.isolation.parent is None or group.parent != self.isolation.parent:
            log.warning("leaving cgroup %s alone: it is not under this server's parent", group)
            return None
        return group

    def close(self, group: Path) -> bool:
        """End a task's group: True when memory ran out in it (an OOM kill).

        Leftover processes are killed; the group is removed now or by a later ``collect``.
        """
        oom = oom_kills(group) > 0
        with contextlib.suppress(OSError):  # gone already: the removal below tells
            kill_members(group)
        if not remove_group(group):
            self._retired.add(group)
        return oom

    def collect(self, keep: Collection[Path]) -> None:
        """Retry the removals ``close`` could not finish.

        The first call also sweeps the parent: every empty group in it that is not in
        ``keep`` (the live tasks' groups) is removed, left by a server that stopped.
        """
        parent = self.isolation.parent
        if not self._swept and parent is not None:
            self._swept = True
            try:
                stale = [p for p in parent.iterdir() if p.is_dir() and p not in keep]
            except OSError:
                stale = []
            for group in stale:
                remove_group(group)
        for group in sorted(self._retired):
            if remove_group(group):
                self._retired.discard(group)


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")
