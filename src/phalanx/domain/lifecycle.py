"""Lifecycle transition tables for jobs and tasks, with a reason on every edge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from phalanx.domain.errors import IllegalTransition
from phalanx.domain.job import JobPhase, TaskPhase

JOB_TRANSITIONS: Final[Mapping[JobPhase, frozenset[JobPhase]]] = {
    # admitted by enqueue; cancelled before admission; aborted (Failed, reason Aborted) when
    # a restart finds state it cannot reconcile or handling the job met a bug
    JobPhase.PENDING: frozenset({JobPhase.QUEUED, JobPhase.CANCELLED, JobPhase.FAILED}),
    # gang placed -> Running; back to Pending when its queue can no longer hold it;
    # cancelled; aborted as from Pending
    JobPhase.QUEUED: frozenset(
        {JobPhase.RUNNING, JobPhase.PENDING, JobPhase.CANCELLED, JobPhase.FAILED}
    ),
    # finished; failed for good; Pending again after eviction, node loss or a retried failure
    JobPhase.RUNNING: frozenset(
        {JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.PENDING, JobPhase.CANCELLED}
    ),
    # terminal phases have no way out; a retried failure goes Running -> Pending, not via Failed
    JobPhase.SUCCEEDED: frozenset(),
    JobPhase.FAILED: frozenset(),
    JobPhase.CANCELLED: frozenset(),
}

TASK_TRANSITIONS: Final[Mapping[TaskPhase, frozenset[TaskPhase]]] = {
    # bound by the scheduler
    TaskPhase.PENDING: frozenset({TaskPhase.BOUND}),
    # process started; stopped before it started (evicted, cancelled); or failed: it could
    # not start, or it was lost with its node before it reported starting
    TaskPhase.BOUND: frozenset({TaskPhase.RUNNING, TaskPhase.RELEASING, TaskPhase.FAILED}),
    # exited with 0 / non-zero (Failed too when lost with its node, as Kubernetes' NodeLost);
    # or asked to stop (eviction, cancel, walltime)
    TaskPhase.RUNNING: frozenset({TaskPhase.SUCCEEDED, TaskPhase.FAILED, TaskPhase.RELEASING}),
    # stopped: back to Pending for a retry, or ended for good
    TaskPhase.RELEASING: frozenset({TaskPhase.PENDING, TaskPhase.FAILED, TaskPhase.SUCCEEDED}),
    # a gang restart resets finished tasks too
    TaskPhase.SUCCEEDED: frozenset({TaskPhase.PENDING}),
    TaskPhase.FAILED: frozenset({TaskPhase.PENDING}),
}


def check_job_transition(current: JobPhase, target: JobPhase) -> None:
    """Raise IllegalTransition unless the table allows ``current -> target``."""
    if target not in JOB_TRANSITIONS[current]:
        raise IllegalTransition(f"job cannot go from {current} to {target}")


def check_task_transition(current: TaskPhase, target: TaskPhase) -> None:
    """Raise IllegalTransition unless the table allows ``current -> target``."""
    if target not in TASK_TRANSITIONS[current]:
        raise IllegalTransition(f"task cannot go from {current} to {target}")
