"""The controller's in-memory view of one live job: its spec, row ids and retry state."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from phalanx.domain.job import Job, JobPhase
from phalanx.engine.decisions import Bind


class Ending(StrEnum):
    """Why a job's tasks are being stopped, which decides what it becomes once they are."""

    CANCEL = "cancel"  # the user asked: Cancelled
    WALLTIME = "walltime"  # ran past its walltime: Failed, not retried (as Slurm's TIMEOUT)
    FAIL = "fail"  # out of retries: Failed
    RETRY = "retry"  # a task failed or was lost: Pending again after a backoff
    RESTART = "restart"  # evicted below its gang minimum: Pending again at once


@dataclass(slots=True, eq=False, kw_only=True)
class Tracked:
    """One live job. ``job`` is the domain spec with every task pending (the template a
    restart goes back to); the engine's ``ClusterState`` holds the current task states
    while the job is tracked there (``in_state``)."""

    id: int
    job: Job
    phase: JobPhase
    task_ids: dict[str, int]
    attempts: int = 0
    preemptions: int = 0
    not_before: float | None = None  # a retried job waits out its backoff outside the engine
    started_at: float | None = None  # this attempt's first placement: walltime counts from it
    ending: Ending | None = None
    ending_message: str = ""
    in_state: bool = False
    reason: tuple[str, str] | None = None  # last (code, message) written for a pending job
    #: binds of Bound tasks whose roles wait for others to be Running (``dependsOn``)
    held: dict[str, Bind] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The job's name."""
        return self.job.name
