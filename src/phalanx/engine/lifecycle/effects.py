"""What goes into the lifecycle (executor reports) and what comes out (effects).

An executor reports ``TaskEvent``s; the reducer answers every input with a list of
effects, in the order they happened, for its driver to carry out: the control plane
writes them through its journal and then calls the executor; the simulator writes them
to ``events.jsonl`` and its metrics and calls its simulated cluster.

``EventKind`` is the one vocabulary of job events both drivers record: a phase change
is an event named after the phase reached (``Queued``, ``Running``, ``Pending``,
``Succeeded``, ``Failed``, ``Cancelled``); ``Placed``, ``Evicted`` and ``TaskFailed``
say what happened to tasks; ``Idle`` that its GPUs sat idle for its queue's window
(``idle``); ``Submitted``, ``Reserved``, ``NodeDown`` and ``NodeUp`` are recorded by
the drivers themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.lifecycle.jobs import Ending

#: ``TaskEvent.reason`` of a task that failed (non-zero code) after the kernel killed one
#: of its processes for exceeding the task's memory limit (Kubernetes' name for it).
OOM_KILLED: Final = "OOMKilled"


class TaskEventKind(StrEnum):
    """What happened to a task, as its executor saw it."""

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
    reason: str | None = None  # for EXITED, when the executor knows why: OOM_KILLED, ...
    message: str = ""
    #: False for a FAILED_TO_START that no retry can fix (a program its user cannot run
    #: or find, an image not on the node, a refused mount): the job fails at once.
    retriable: bool = True


class EventKind(StrEnum):
    """Job events: the control plane's event rows and the simulator's ``events.jsonl``."""

    SUBMITTED = "Submitted"  # the job arrived
    QUEUED = "Queued"  # admitted by enqueue (or by its first placement)
    RUNNING = "Running"  # its gang was placed
    PENDING = "Pending"  # waiting again: evicted below its gang, or retrying after a failure
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    PLACED = "Placed"  # tasks were bound to nodes
    EVICTED = "Evicted"  # tasks were asked to stop (preempt, reclaim, drain, restart, ...)
    TASK_FAILED = "TaskFailed"  # a task failed, was lost, or could not start
    RESERVED = "Reserved"  # a starving job holds a reservation (simulator)
    NODE_DOWN = "NodeDown"  # a node failed (simulator)
    NODE_UP = "NodeUp"  # a failed node is back (simulator)
    RESIZED = "Resized"  # an elastic role grew or shrank (the size history)
    IDLE = "Idle"  # its GPUs sat below its queue's idleGpus threshold for the window


@dataclass(frozen=True, slots=True, kw_only=True)
class JobChanged:
    """``job`` reached ``phase``; ``reason`` is a code, ``message`` a sentence."""

    job: str
    phase: JobPhase
    reason: str
    message: str
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskChanged:
    """A task moved from ``previous`` to ``phase``; ``node`` and ``gpus`` while it holds one."""

    job: str
    task: str
    role: str
    phase: TaskPhase
    previous: TaskPhase
    time: float
    node: str | None = None
    gpus: tuple[int, ...] = ()
    exit_code: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCounters:
    """The job's bookkeeping after a change: attempts spent, preemptions suffered, when a
    retry may be placed (None: now), when this attempt was first placed, and why its
    tasks are being stopped (None: they are not), all of which a restart needs back."""

    job: str
    attempts: int
    preemptions: int
    not_before: float | None
    started_at: float | None
    ending: Ending | None = None
    ending_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiting:
    """Why a waiting job is not placed, when that changed (``code`` a ``ReasonCode``)."""

    job: str
    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """A job event for people. ``binds`` are the tasks a ``Placed`` event placed;
    ``stops`` the tasks an ``Evicted`` event stopped; ``tasks`` the task a ``TaskFailed``
    event is about."""

    job: str
    kind: EventKind
    message: str
    time: float
    binds: tuple[Bind, ...] = ()
    stops: tuple[Evict, ...] = ()
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Resized:
    """The job's elastic ``role`` has ``size`` tasks now: ``added`` are new (Pending),
    ``removed`` are gone (each had stopped, or never started); ``reason`` says why."""

    job: str
    role: str
    size: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    reason: str
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """Ask the executor to start these bound tasks."""

    binds: tuple[Bind, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """Ask the executor to stop these tasks (each ends with an EXITED report)."""

    evictions: tuple[Evict, ...]


Effect = JobChanged | TaskChanged | JobCounters | Waiting | Event | Resized | Start | Stop
