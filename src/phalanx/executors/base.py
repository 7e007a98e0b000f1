"""The Executor protocol: the seam between the scheduler and whatever runs tasks.

An executor starts the tasks a session binds and stops the ones it evicts, and reports
events back (started, exited with a code, lost with its node, failed to start). It never
writes job state: the one lifecycle (``phalanx.engine.lifecycle``), driven by the
controller or the simulator, reads the events and decides; the event types live there.
The simulator's cluster, the local process executor and the Ray executor (many
machines, ``executors.ray``) implement it.

Four capabilities are optional, each its own protocol: ``Recoverable`` (tasks that
outlive the server), ``LogSource`` (each task's stdout and stderr, read wherever the
task ran: the local executor reads its files, the Ray executor fetches from the node),
``NodeSource`` (nodes that come and go: the Ray executor's are its cluster's) and
``GpuSource`` (each node's GPU readings, attributed to the tasks given the cards).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol, runtime_checkable

from phalanx.domain.node import Node
from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.lifecycle import OOM_KILLED, TaskEvent, TaskEventKind
from phalanx.executors.records import ProcessRecord
from phalanx.telemetry.readings import NodeSample

__all__ = [
    "COMMAND_NOT_EXECUTABLE",
    "COMMAND_NOT_FOUND",
    "OOM_KILLED",
    "Executor",
    "GpuSource",
    "LogAbsence",
    "LogSource",
    "LogStream",
    "NodeSource",
    "NodeState",
    "Recoverable",
    "TaskEvent",
    "TaskEventKind",
    "TaskLog",
]

#: ``TaskEvent.reason`` of a task that exited with 127 or 126: the codes a POSIX shell
#: gives when a command it was to run is not found, or is found but cannot be executed.
COMMAND_NOT_FOUND: Final = "command not found: see the task's stderr.log"
COMMAND_NOT_EXECUTABLE: Final = "command not executable: see the task's stderr.log"


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


@runtime_checkable
class ProgressSource(Protocol):
    """An executor that can read the progress reports its tasks write."""

    def progress(self, job: str, task: str, limit: int) -> tuple[int, bytes] | None:
        """The task's report file as (its modification time in ns, at most ``limit``
        bytes of it), or None when it wrote none (or wrote something that is not a plain
        file: a link or a pipe is never followed or read)."""


class LogStream(StrEnum):
    """Which output of a task."""

    STDOUT = "stdout"
    STDERR = "stderr"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogAbsence:
    """Why a task's stream cannot be read where the server looks for it (one sentence
    naming the place), and what a person can do about it."""

    reason: str
    fix: str


class TaskLog(Protocol):
    """One output stream of one task: bytes that only grow, read by offset.

    Offsets count bytes from the stream's start; every run of the task (a retry, a
    restart of its gang) appends to the same stream. A task that never wrote anything,
    or never ran, has an empty stream: ``size()`` is 0 and every read is ``b""``.
    Neither call waits for output that is not written yet. ``absent()`` tells an empty
    stream from one that is not there to be read (a task that started has one, empty
    or not).
    """

    def size(self) -> int:
        """How many bytes the stream holds now."""
        ...

    def read(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset`` (fewer at the end, ``b""`` past it).
        Raises ``InvalidInput`` for a negative offset or limit."""
        ...

    def absent(self) -> LogAbsence | None:
        """None when the stream is there to be read (empty or not); otherwise why not
        (nothing where it should be, something that is not the task's log file, a file
        the server cannot read, a node that cannot be asked). Never blocks on, and never
        follows, anything a task controls."""
        ...


@runtime_checkable
class LogSource(Protocol):
    """An executor that keeps its tasks' output and serves it wherever the task ran.

    ``logs`` is called from the API's threads while the controller drives the executor
    on its own: it must not touch state that the controller's calls change unguarded.
    """

    def logs(self, job: str, task: str, stream: LogStream) -> TaskLog:
        """The ``stream`` of ``task`` of ``job`` (empty if it never wrote or never ran here)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    """The nodes an executor has: every node it has seen (one that died stays, not
    ``alive``, as Kubernetes keeps a NotReady node) and a ``version`` that grows with
    every change; ``datasets``, by node, the listing digests its dataset cache holds
    whole (``Node.datasets``; a node not named holds none)."""

    nodes: tuple[Node, ...] = ()
    alive: frozenset[str] = frozenset()
    version: int = 0
    datasets: Mapping[str, frozenset[str]] = field(default_factory=dict)


@runtime_checkable
class NodeSource(Protocol):
    """An executor whose nodes join and die while the server runs: the controller
    follows ``node_state`` (new nodes join the engine's snapshot; a node not alive takes
    no new task, and the executor reports its tasks LOST)."""

    def node_state(self) -> NodeState:
        """The nodes as last seen; any thread may call it."""
        ...


@runtime_checkable
class GpuSource(Protocol):
    """An executor whose nodes sample their GPUs (``phalanx.telemetry``)."""

    def gpu_samples(self) -> list[NodeSample]:
        """The samples its nodes took since the last call, oldest first, each once. A
        node without NVML gives one sample saying why (``NodeSample.absent``), once."""
        ...
