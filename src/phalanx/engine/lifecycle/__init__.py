"""The one job lifecycle both drivers use: ``Lifecycle`` and what goes in and out of it."""

from phalanx.engine.lifecycle.effects import (
    OOM_KILLED,
    Effect,
    Event,
    EventKind,
    JobChanged,
    JobCounters,
    Resized,
    Start,
    Stop,
    TaskChanged,
    TaskEvent,
    TaskEventKind,
    Waiting,
)
from phalanx.engine.lifecycle.idle import IdleVerdict, IdleWatch, act_on
from phalanx.engine.lifecycle.jobs import BACKOFF, MAX_BACKOFF, Ending, JobLife, RetryPolicy
from phalanx.engine.lifecycle.ledger import PHASE_OF_STATUS, TERMINAL
from phalanx.engine.lifecycle.reducer import STAGES, Lifecycle, parts_by_job

__all__ = [
    "BACKOFF",
    "MAX_BACKOFF",
    "OOM_KILLED",
    "PHASE_OF_STATUS",
    "STAGES",
    "TERMINAL",
    "Effect",
    "Ending",
    "Event",
    "EventKind",
    "IdleVerdict",
    "IdleWatch",
    "JobChanged",
    "JobCounters",
    "JobLife",
    "Lifecycle",
    "Resized",
    "RetryPolicy",
    "Start",
    "Stop",
    "TaskChanged",
    "TaskEvent",
    "TaskEventKind",
    "Waiting",
    "act_on",
    "parts_by_job",
]
