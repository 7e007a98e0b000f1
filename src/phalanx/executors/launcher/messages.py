"""What the server and its launcher say to each other: plain frozen values, pickled.

Requests go from the server to the launcher (``Start``, ``Signal``); ``Start`` gets
exactly one reply with its ``id`` (``Started`` or ``Failed``), and the launcher tells of
every task's end unasked (``Exited``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.executors.identity import TaskIdentity
from phalanx.executors.records import ProcessRecord
from phalanx.executors.taskgroups import GroupPlan


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """Start one task: ``argv`` under the wrapper in ``workdir`` with exactly ``env``
    (``process.spawn``).

    ``group`` is its cgroup to make (None: no cgroup isolation, then ``memory_kib`` is
    its RLIMIT_AS, if any); ``record`` is what to persist once it runs, its ``pid`` and
    ``start_time`` filled in by the launcher. ``files`` are written into ``workdir``
    before the task starts, by path (``taskdirs.write_task_file``): its hostfile, its
    secrets.

    ``client``: ``argv`` is a container runtime's client (``executors.containers``). It
    runs as the server's own user (it starts the container as ``identity``, who still
    owns ``workdir`` and the logs), and its wrapper writes ``exit_code`` into
    ``record.workdir``, a directory of the server's own, never into ``workdir``.
    """

    id: int
    argv: tuple[str, ...]
    workdir: Path
    env: dict[str, str]
    identity: TaskIdentity | None
    group: GroupPlan | None
    memory_kib: int | None
    record: ProcessRecord
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    client: bool = False
    attempt: int | None = None  # the job's attempt, for the logs' header (None: unknown)


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal:
    """Send ``signum`` to the process group of the task whose wrapper is ``pid``, if the
    launcher has not reaped it (otherwise nothing: it ended, and its pid is free)."""

    pid: int
    signum: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """The reply to ``Start`` ``id``: the task runs; its wrapper is ``pid``, started at
    ``start_time`` (``process.process_start_time``), and its record is on disk."""

    id: int
    pid: int
    start_time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """The reply to ``Start`` ``id``: nothing runs, because of ``error`` (an ``OSError``
    or ``ValueError`` as the start raised it: ``failures.start_failure`` words it)."""

    id: int
    error: Exception


@dataclass(frozen=True, slots=True, kw_only=True)
class Exited:
    """The task whose wrapper was ``pid``, started at ``start_time``, ended with ``code`` (the wrapper's record of
    the command's status, else the wrapper's own: ``process.TaskProcess.poll``); what it
    left in its process group was killed, and its pid is reaped."""

    pid: int
    start_time: float
    code: int | None
