"""cgroup filesystem primitives: the mounts this process sees, and reading and writing
interface files (shared by the v2 and v1 code)."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_OCTAL: Final = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class Mount:
    """One cgroup filesystem from mountinfo: where it is, which group it shows, how."""

    point: Path
    root: str
    read_only: bool
    fstype: str
    options: frozenset[str]


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup (v1) and cgroup2 mounts listed in a ``/proc/<pid>/mountinfo`` text."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 6:
            continue
        tail = line.split(" - ", 1)[1].split()
        if len(tail) < 3 or tail[0] not in {"cgroup", "cgroup2"}:
            continue
        options = frozenset(fields[5].split(",")) | frozenset(tail[2].split(","))
        mounts.append(
            Mount(
                point=Path(_unescape(fields[4])),
                root=_unescape(fields[3]),
                read_only="ro" in options,
                fstype=tail[0],
                options=options,
            )
        )
    return mounts


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes (\040 ...).
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def read_pids(group: Path) -> list[int]:
    """The processes in ``group`` (its ``cgroup.procs``); none when it cannot be read."""
    try:
        return [int(word) for word in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def write_value(path: Path, value: str) -> None:
    """Write ``value`` to a cgroup interface file in one ``write``; the kernel's error is raised."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def oom_kill_count(path: Path) -> int:
    """The ``oom_kill`` count of a cgroup's ``memory.events`` (v2) or ``memory.oom_control``
    (v1) file at ``path``: processes the kernel OOM-killed there; 0 when unknown."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    counts = dict(line.split(maxsplit=1) for line in lines if " " in line)
    value = counts.get("oom_kill", "0").strip()
    return int(value) if value.isdigit() else 0


def remove_group(group: Path) -> bool:
    """Remove ``group``; True when it is gone, False while processes or children keep it."""
    try:
        os.rmdir(group)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def fresh_group(group: Path) -> None:
    """Make the cgroup ``group``. One an earlier run left is replaced when it is empty,
    else ``OSError`` EBUSY: it is still in use."""
    try:
        group.mkdir()
    except FileExistsError:
        if not remove_group(group):
            raise OSError(
                errno.EBUSY, f"cgroup {group} is still in use by an earlier run"
            ) from None
        group.mkdir()
