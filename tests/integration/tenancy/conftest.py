"""Fixtures for tenancy tests: a directory any uid may pass through, removed afterwards
with every process that still runs in it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.executors.cgroups import host_isolation
from phalanx.executors.taskgroups import TaskGroups, scope_of


@pytest.fixture
def world() -> Iterator[Path]:
    """A fresh directory in /tmp that every uid may pass through (0711) but not list,
    as /var/lib is for a service's data dir. Afterwards every process still working in
    it (a task a failed test left running) is killed, and it is removed."""
    base = Path(tempfile.mkdtemp(prefix="phalanx-tenancy-", dir="/tmp"))
    base.chmod(0o711)
    yield base
    kill_working_in(base)
    groups = TaskGroups(host_isolation(), scope=scope_of(base / "data"))
    groups.collect(keep=())  # the task groups such a task leaves, and the parents
    groups.release()
    shutil.rmtree(base, ignore_errors=True)


def kill_working_in(base: Path) -> None:
    """SIGKILL every process whose working directory is ``base`` or below."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
        except OSError:
            continue
        if cwd.is_relative_to(base):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)
