"""The Executor protocol: the seam between the scheduler and whatever runs tasks.

An executor starts the tasks a session binds and stops the ones it evicts, and reports
events back (started, exited with a code, lost with its node, failed to start). It
never writes job state: the controller that owns the jobs reads the events and
decides. The simulator's cluster and the local process executor implement it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol, runtime_checkable

from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.records import ProcessRecord

#: ``TaskEvent.reason`` of a task that failed (non-zero code) after the kernel killed one
#: of its processes for exceeding the task's memory limit (Kubernetes' name for it).
OOM_KILLED: Final = "OOMKilled"

#: ``TaskEvent.reason`` of a task that exited with 127 or 126: the codes a POSIX shell
#: gives when a command it was to run is not found, or is found but cannot be executed.
COMMAND_NOT_FOUND: Final = "command not found: see the task's stderr.log"
COMMAND_NOT_EXECUTABLE: Final = "command not executable: see the task's stderr.log"


class TaskEventKind(StrEnum):
    """What happened to a task."""

    STARTED = "started"  # its process (or simulated run) began
    EXITED = "exited"  # it ended by itself (code 0: success) or after a stop request
    LOST = "lost"  # its node failed or vanished; nothing more is known
    # it never ran: its process could not be made (the node is fine; the task is not)
    FAILED_TO_START = "failed-to-start"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent:
    """One report from an executor.

    ``message`` is a sentence a person can act on, naming the cause and the fix: always
    set for FAILED_TO_START ("the task's command line and environment are over the
    kernel's limit ... pass large values in a file"), and for LOST when the reporter
    knows more than "the node is gone".
    """

    kind: TaskEventKind
    time: float
    job: str
    task: str
    node: str
    exit_code: int | None = None  # for EXITED
    stopped: bool = False  # EXITED because it was asked to stop (evicted, cancelled, killed)
    # for EXITED, when the executor knows why: OOM_KILLED, COMMAND_NOT_FOUND, ...
    reason: str | None = None
    message: str = ""


class Executor(Protocol):
    """Runs tasks on nodes. Implementations must be idempotent for repeated requests."""

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        """Start every bound task; each produces STARTED, then EXITED or LOST, or else
        FAILED_TO_START. One task's or one job's trouble never raises: it is that task's
        (or that job's tasks') FAILED_TO_START."""
        ...

    def stop(self, evictions: Sequence[Evict], *, now: float, grace: float) -> None:
        """Ask tasks to stop (SIGTERM, then SIGKILL after ``grace`` seconds); each ends EXITED."""
        ...

    def poll(self, *, now: float) -> list[TaskEvent]:
        """Events that happened up to ``now``, oldest first, each reported once."""
        ...


@runtime_checkable
class Recoverable(Protocol):
    """An executor whose tasks outlive the server: the controller persists ``records()``
    and hands them to ``adopt`` after a restart."""

    def records(self) -> list[ProcessRecord]:
        """One record per live task."""
        ...

    def recorded(self, job: str, task: str) -> ProcessRecord | None:
        """The record the executor itself kept of the task's last start, if any."""
        ...

    def adopt(self, records: Iterable[ProcessRecord], *, now: float) -> None:
        """Re-attach the recorded tasks still alive; report the others as EXITED or LOST."""
        ...
