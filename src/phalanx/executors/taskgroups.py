"""One cgroup per task (v2, or one per hierarchy under v1): its limits, its end, its removal.

Guarantees, under ``cgroups.IsolationKind.CGROUP2`` or ``CGROUP1``:

- a task's group is named ``<job>:<task>`` (see ``group_name``): under v2 one group in
  the executor's parent, under v1 one in each hierarchy's parent (``cgroup1``). It is
  created fresh for each run, all its limits written before the task's wrapper runs the
  command: CPU from the CPU limit, memory from the memory limit with swap off where swap
  is accounted, and the number of processes (threads count too) where the ``pids``
  controller is there. A limit the task does not request is ``LimitDefaults``' (1 CPU,
  1 GiB, 4096 processes): no task runs unlimited;
- the server puts the task's wrapper into the group before the wrapper runs the command
  (``process.spawn``), so the command and all it forks are inside, whatever session or
  process group it makes, and whatever uid it runs as;
- when the task ends, what is left in the group is killed, the kernel's count of OOM
  kills in it tells whether memory ran out, and the group is removed: at once, or by a
  later ``collect`` once the killed processes are gone. A group this executor did not
  create or adopt is only removed by the startup sweep, and only if it is empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from phalanx.executors import cgroup1
from phalanx.executors.cgroupfs import (
    fresh_group,
    oom_kill_count,
    read_pids,
    remove_group,
    write_value,
)
from phalanx.executors.cgroups import Isolation, IsolationKind

log = logging.getLogger(__name__)

#: ``cpu.max`` period in microseconds (the kernel's default) and the smallest quota it takes.
CPU_PERIOD_US: Final = 100_000
CPU_MIN_QUOTA_US: Final = 1_000
#: Longest directory name the kernel accepts, in bytes.
NAME_MAX: Final = 255


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitDefaults:
    """The limits of a task that requests none, under cgroup isolation: small, never
    unlimited. ``pids`` bounds every task (no request asks for a process count)."""

    cpu_millicores: int = 1000
    memory_bytes: int = 2**30
    pids: int = 4096

    def __post_init__(self) -> None:
        for name in ("cpu_millicores", "memory_bytes", "pids"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    def describe(self) -> str:
        """For people: ``1 CPU, 1 GiB, 4096 processes``."""
        cpus = f"{self.cpu_millicores / 1000:g} CPU"
        memory = f"{self.memory_bytes / 2**30:g} GiB"
        return f"{cpus}, {memory}, {self.pids} processes"


@dataclass(frozen=True, slots=True)
class TaskGroup:
    """One task's group: its directory in every hierarchy (one under v2). The first is
    the one that counts memory and names the group in the task's record."""

    dirs: tuple[Path, ...]

    @property
    def path(self) -> Path:
        """The group's directory that counts memory (and OOM kills)."""
        return self.dirs[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPlan:
    """A task's group before it exists: where, under which name, with which limits.

    A plain value (it crosses to the launcher process): ``create`` makes the group."""

    kind: IsolationKind
    parents: tuple[Path, ...]
    name: str
    cpu_millicores: int
    memory_bytes: int
    pids: int

    @property
    def group(self) -> TaskGroup:
        """The group ``create`` makes: ``name`` in every parent."""
        return TaskGroup(tuple(parent / self.name for parent in self.parents))

    def create(self) -> TaskGroup:
        """Make the group fresh, every limit written (see the module docstring). Raises
        ``OSError`` when it cannot be made or is still in use; nothing is left then."""
        if self.kind is IsolationKind.CGROUP1:
            return TaskGroup(
                cgroup1.create_v1(
                    self.parents,
                    self.name,
                    cpu_millicores=self.cpu_millicores,
                    memory_bytes=self.memory_bytes,
                    pids=self.pids,
                )
            )
        made = create_group(
            self.parents[0],
            self.name,
            cpu_millicores=self.cpu_millicores,
            memory_bytes=self.memory_bytes,
            pids=self.pids,
        )
        return TaskGroup((made,))


def scope_of(data_dir: Path) -> str:
    """The ``scope`` of a server's task groups: named by its data dir, so one per server."""
    return hashlib.sha256(str(data_dir.absolute()).encode()).hexdigest()[:16]


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
    parent: Path,
    name: str,
    *,
    cpu_millicores: int | None,
    memory_bytes: int | None,
    pids: int | None = None,
) -> Path:
    """A fresh cgroup v2 group ``parent/name`` with the task's limits written; its path.

    ``None`` writes no limit (``max``). ``pids`` is written where the group has a
    ``pids.max`` (the parent enables ``pids``). An empty group left from an earlier run
    is replaced (its OOM count must not be read as this run's). Raises ``OSError`` when
    the group cannot be made or is still in use; nothing is left behind then.
    """
    group = parent / name
    fresh_group(group)
    try:
        write_value(group / "cpu.max", cpu_max(cpu_millicores))
        write_value(group / "memory.max", "max" if memory_bytes is None else str(memory_bytes))
        # A sibling has memory.swap.max exactly when the parent has: swap is accounted.
        if (parent / "memory.swap.max").exists():
            write_value(group / "memory.swap.max", "max" if memory_bytes is None else "0")
        if pids is not None and (group / "pids.max").exists():
            write_value(group / "pids.max", str(pids))
    except OSError:
        remove_group(group)
        raise
    return group


def oom_kills(group: Path) -> int:
    """How many processes the kernel OOM-killed in ``group`` (``memory.events``); 0 if unknown."""
    return oom_kill_count(group / "memory.events")


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


class TaskGroups:
    """The task groups of one executor (a mutable holder: it remembers removals to retry).

    ``scope`` names the executor's v1 parents (``cgroup1.parents``); ``defaults`` are
    the limits of a task that requests none.
    """

    __slots__ = ("_parents", "_retired", "_swept", "defaults", "isolation")

    def __init__(
        self,
        isolation: Isolation,
        *,
        scope: str = "default",
        defaults: LimitDefaults | None = None,
    ) -> None:
        self.isolation = isolation
        self.defaults = defaults or LimitDefaults()
        self._parents: tuple[Path, ...] = ()
        if isolation.parent is not None:
            self._parents = (isolation.parent,)
        elif isolation.kind is IsolationKind.CGROUP1:
            self._parents = cgroup1.parents(isolation.hierarchies, scope)
        self._retired: set[Path] = set()
        self._swept = False

    @property
    def parents(self) -> tuple[Path, ...]:
        """Where this executor's task groups are made: one per hierarchy; none without cgroups."""
        return self._parents

    def plan(
        self, job: str, task: str, *, cpu_millicores: int | None, memory_bytes: int | None
    ) -> GroupPlan | None:
        """What the task's group will be, limits (or the defaults) included, or None
        without cgroup isolation. Nothing is made: ``GroupPlan.create`` does that,
        wherever the task is started (the launcher process)."""
        if not self._parents:
            return None
        return GroupPlan(
            kind=self.isolation.kind,
            parents=self._parents,
            name=group_name(job, task),
            cpu_millicores=cpu_millicores or self.defaults.cpu_millicores,
            memory_bytes=memory_bytes or self.defaults.memory_bytes,
            pids=self.defaults.pids,
        )

    def create(
        self, job: str, task: str, *, cpu_millicores: int | None, memory_bytes: int | None
    ) -> TaskGroup | None:
        """The task's fresh group with its limits (or the defaults), or None without
        cgroup isolation."""
        plan = self.plan(job, task, cpu_millicores=cpu_millicores, memory_bytes=memory_bytes)
        return None if plan is None else plan.create()

    def recorded(self, cgroup: str) -> TaskGroup | None:
        """The group a task record names (its ``path``), if this executor manages it:
        one under its parent. Any other is left alone (a changed setting, or a record
        not ours)."""
        if not cgroup:
            return None
        path = Path(cgroup)
        if not self._parents or path.parent != self._parents[0]:
            log.warning("leaving cgroup %s alone: it is not under this server's parent", path)
            return None
        return TaskGroup(tuple(parent / path.name for parent in self._parents))

    def close(self, group: TaskGroup) -> bool:
        """End a task's group: True when memory ran out in it (an OOM kill).

        Leftover processes are killed; the group is removed now or by a later ``collect``.
        """
        oom = self.oom_kills(group) > 0
        with contextlib.suppress(OSError):  # gone already: the removal below tells
            self._kill(group)
        for directory in group.dirs:
            if not remove_group(directory):
                self._retired.add(directory)
        return oom

    def oom_kills(self, group: TaskGroup) -> int:
        """How many processes the kernel OOM-killed in ``group``; 0 if unknown."""
        if self.isolation.kind is IsolationKind.CGROUP1:
            return cgroup1.oom_kills_v1(group.path)
        return oom_kills(group.path)

    def collect(self, keep: Collection[TaskGroup]) -> None:
        """Retry the removals ``close`` could not finish.

        The first call also sweeps the parents: every empty group in them that is not in
        ``keep`` (the live tasks' groups) is removed, left by a server that stopped.
        """
        if not self._swept and self._parents:
            self._swept = True
            kept = {directory for group in keep for directory in group.dirs}
            for parent in self._parents:
                try:
                    stale = [p for p in parent.iterdir() if p.is_dir() and p not in kept]
                except OSError:
                    stale = []
                for group in stale:
                    remove_group(group)
        for directory in sorted(self._retired):
            if remove_group(directory):
                self._retired.discard(directory)

    def release(self) -> None:
        """Remove this executor's v1 parents where nothing is left in them (at shutdown:
        a parent that still holds a running task's group stays for the next start)."""
        if self.isolation.kind is IsolationKind.CGROUP1:
            cgroup1.remove_parents(self._parents)

    def _kill(self, group: TaskGroup) -> None:
        if self.isolation.kind is not IsolationKind.CGROUP1:
            kill_members(group.path)
            return
        for directory in group.dirs:
            for pid in read_pids(directory):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")
