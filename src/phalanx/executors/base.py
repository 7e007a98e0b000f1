"""The Executor protocol: the seam between the scheduler and whatever runs tasks.

An executor starts the tasks a session binds and stops the ones it evicts, and reports
events back (started, exited with a code, lost with its node, failed to start). It never
writes job state: the one lifecycle (``phalanx.engine.lifecycle``), driven by the
controller or the simulator, reads the events and decides; the event types live there.
The simulator's cluster and the local process executor implement it (an executor for
many machines is not built yet).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.lifecycle import OOM_KILLED, TaskEvent, TaskEventKind
from phalanx.executors.records import ProcessRecord

__all__ = ["OOM_KILLED", "Executor", "Recoverable", "TaskEvent", "TaskEventKind"]


class Executor(Protocol):
    """Runs tasks on nodes. Implementations must be idempotent for repeated requests."""

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        """Start every bound task; each produces STARTED, then EXITED or LOST."""
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
