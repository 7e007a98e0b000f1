"""cgroup v1: a task's group in each of the ``cpu``, ``memory`` and ``pids`` hierarchies.

Hosts that mount the controllers as cgroup v1 (hybrid hosts: most CI machines, older
distributions) limit a task through one group per hierarchy. Guarantees:

- ``detect_v1`` only reads. It finds the ``cpu`` and ``memory`` hierarchies (and
  ``pids`` where mounted), each mounted read-write with its interface files at the
  mount point, which this user may write (root, in practice). Anything else is a reason;
- each server has a parent per hierarchy, ``<mount point>/phalanx/<scope>``
  (``parents``), where ``scope`` names its data dir: servers on one host never share a
  parent, and a restarted server finds its tasks' groups again;
- a task's group (``create_v1``) is ``<parent>/<name>`` in every hierarchy, made fresh
  for each run with its limits written before the task joins it: ``cpu.cfs_period_us``
  100000 and ``cpu.cfs_quota_us`` from the CPU limit; ``memory.limit_in_bytes`` from the
  memory limit, and ``memory.memsw.limit_in_bytes`` the same where swap is accounted, so
  the task cannot swap past it; ``pids.max``. Limits apply to everything in the group
  together, however many processes the task forks;
- an OOM kill in the group shows in ``memory.oom_control`` (``oom_kill``, Linux 4.13+).

The caller (``taskgroups.TaskGroups``) puts the task in, kills what is left at its end
(v1 has no ``cgroup.kill``) and removes the group.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from phalanx.executors.cgroupfs import (
    Mount,
    fresh_group,
    oom_kill_count,
    remove_group,
    write_value,
)

#: The hierarchies a task group is made in, in this order (memory first: it names the group).
HIERARCHIES: Final = ("memory", "cpu", "pids")
#: The file at a mount point that shows the controller is really there.
_PROBE: Final = {"cpu": "cpu.cfs_quota_us", "memory": "memory.limit_in_bytes", "pids": "tasks"}
#: The group under each mount point that holds every server's parent.
TOP: Final = "phalanx"
#: The smallest ``cpu.cfs_quota_us`` the kernel takes, in microseconds.
CPU_MIN_QUOTA_US: Final = 1_000

Hierarchies = tuple[tuple[str, Path], ...]


def detect_v1(mounts: Sequence[Mount]) -> tuple[Hierarchies, bool] | str:
    """The usable v1 hierarchies (controller, mount point) and whether ``pids`` is among
    them; or why cgroup v1 cannot be used. Reads only."""
    found: list[tuple[str, Path]] = []
    for name in HIERARCHIES:
        mount = next(
            (m for m in mounts if m.fstype == "cgroup" and name in m.options),
            None,
        )
        why = _unusable(name, mount)
        if why is None and mount is not None:
            found.append((name, mount.point))
        elif name != "pids":
            return why or f"no {name} hierarchy"
    return tuple(found), any(name == "pids" for name, _ in found)


def _unusable(name: str, mount: Mount | None) -> str | None:
    if mount is None:
        return f"no {name} hierarchy is mounted"
    if mount.read_only:
        return f"the {name} hierarchy at {mount.point} is mounted read-only"
    if not (mount.point / _PROBE[name]).exists():
        return f"{mount.point} shows no {_PROBE[name]}"
    if not os.access(mount.point, os.W_OK):
        return f"{mount.point} is not writable by uid {os.getuid()} (run phalanx up as root)"
    return None


def parents(hierarchies: Hierarchies, scope: str) -> tuple[Path, ...]:
    """The server's parent group in each hierarchy, in ``HIERARCHIES`` order."""
    points = dict(hierarchies)
    return tuple(points[name] / TOP / scope for name in HIERARCHIES if name in points)


def create_v1(
    parents: Sequence[Path],
    name: str,
    *,
    cpu_millicores: int,
    memory_bytes: int,
    pids: int,
) -> tuple[Path, ...]:
    """A fresh group ``name`` under each of ``parents`` with the limits written; the
    groups in the same order. Raises ``OSError`` when a group cannot be made, is still
    in use by an earlier run, or refuses a limit; nothing is left behind then."""
    made: list[Path] = []
    try:
        for parent in parents:
            group = parent / name
            try:
                fresh_group(group)
            except FileNotFoundError:  # the first task's: make the parent, once
                parent.mkdir(parents=True, exist_ok=True)
                fresh_group(group)
            made.append(group)
            _limit(group, cpu_millicores=cpu_millicores, memory_bytes=memory_bytes, pids=pids)
    except OSError:
        for group in made:
            remove_group(group)
        raise
    return tuple(made)


def _limit(group: Path, *, cpu_millicores: int, memory_bytes: int, pids: int) -> None:
    """Write each limit whose file the group has (each hierarchy has its controller's).

    The CPU quota is written against the group's period (the kernel's 100 ms for a new
    group) without writing the period: every bandwidth write walks all the host's CPU
    groups, so one write per task instead of two halves what starting tasks costs when
    thousands run."""
    try:
        period = int((group / "cpu.cfs_period_us").read_text())
    except FileNotFoundError:
        pass
    else:
        quota = max(CPU_MIN_QUOTA_US, cpu_millicores * period // 1000)
        write_value(group / "cpu.cfs_quota_us", str(quota))
    if _write_if_present(group / "memory.limit_in_bytes", str(memory_bytes)):
        _write_if_present(group / "memory.memsw.limit_in_bytes", str(memory_bytes))
    _write_if_present(group / "pids.max", str(pids))


def _write_if_present(path: Path, value: str) -> bool:
    """``write_value`` where the file exists; False (nothing written) where it does not."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return False
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)
    return True


def oom_kills_v1(group: Path) -> int:
    """How many processes the kernel OOM-killed in the memory ``group``; 0 if unknown."""
    return oom_kill_count(group / "memory.oom_control")


def remove_parents(parents: Sequence[Path]) -> None:
    """Remove the server's parents where they are empty (and ``phalanx`` above, if empty)."""
    for parent in parents:
        for path in (parent, parent.parent):
            with contextlib.suppress(OSError):
                os.rmdir(path)
