"""What the lifecycle keeps of one live job between events, and its retry policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from phalanx.domain.job import Job, JobPhase
from phalanx.engine.decisions import Bind

#: A failed job's first retry waits this long (seconds), each further one twice as long,
#: up to ``MAX_BACKOFF``: the defaults of the control plane and the simulator alike.
BACKOFF: Final = 10.0
MAX_BACKOFF: Final = 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How long a failed job waits before its next attempt: ``backoff`` seconds after
    the first failure, twice as long after each further one, at most ``max_backoff``."""

    backoff: float = BACKOFF
    max_backoff: float = MAX_BACKOFF

    def delay(self, attempts: int) -> float:
        """Seconds to wait before attempt ``attempts + 1`` (``attempts`` >= 1 spent)."""
        return float(min(self.backoff * 2.0 ** min(attempts - 1, 60), self.max_backoff))


class Ending(StrEnum):
    """Why a job's tasks are being stopped, which decides what it becomes once they are."""

    CANCEL = "cancel"  # the user asked: Cancelled
    WALLTIME = "walltime"  # ran past its walltime: Failed, not retried (as Slurm's TIMEOUT)
    FAIL = "fail"  # out of retries: Failed
    RETRY = "retry"  # a task failed: Pending again after a backoff
    RETRY_NOW = "retry-now"  # a task's node was lost (not the job's doing): Pending at once
    RESTART = "restart"  # evicted below its gang minimum: Pending again at once
    ABORT = "abort"  # its state cannot be reconciled, or handling it met a bug: Failed
    # its GPUs sat idle for its queue's window (idleGpus, action stop): Failed, not
    # retried (a retry would hold the same GPUs idle again)
    IDLE = "idle"


#: Endings after which a stopped task is over for good (Failed), not Pending again.
FOR_GOOD = frozenset({Ending.CANCEL, Ending.WALLTIME, Ending.FAIL, Ending.ABORT, Ending.IDLE})


@dataclass(slots=True, eq=False, kw_only=True)
class JobLife:
    """One live job. ``job`` is its spec with every task pending (what a new attempt
    starts from); while ``in_state`` the engine's ``ClusterState`` holds its task states.
    A job waiting out a retry backoff, or one the engine cannot take (an orphan), is
    outside the state."""

    job: Job
    phase: JobPhase
    attempts: int = 0
    preemptions: int = 0
    not_before: float | None = None  # a retried job waits out its backoff outside the engine
    started_at: float | None = None  # this attempt's first placement: walltime counts from it
    ending: Ending | None = None
    ending_message: str = ""
    in_state: bool = False
    reason: tuple[str, str] | None = None  # the last (code, message) said of it waiting
    #: binds of Bound tasks whose roles wait for others to be Running (``dependsOn``)
    held: dict[str, Bind] = field(default_factory=dict)
    #: why each of its stopping tasks was asked to stop (said when an elastic one leaves)
    stopping: dict[str, str] = field(default_factory=dict)
    #: a restart-mode rescale under way: the size its gang restarts at, and why
    restart_size: tuple[int, str] | None = None

    @property
    def name(self) -> str:
        """The job's name."""
        return self.job.name
