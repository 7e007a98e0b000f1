"""enqueue: admit pending jobs (Pending -> Queued) whose minimum their queue and the cluster can hold.

A job is admitted when the plugins' ``job_enqueueable`` vote permits it (its queue's
capability can hold its minimum) and the cluster could make room for that minimum in
one of four ways, checked in this order:

1. room in the budget: ``overcommitFactor`` (Volcano's default 1.2) times schedulable
   capacity, less the work of non-overcommit queues that is running or admitted (in
   this session or an earlier one, and not yet placed);
2. reclaim: its queue and every ancestor stay within their deserved share with it;
3. a reservation: it is starving (backfill will reserve room for it);
4. preemption: lower-priority, preemptible work of its own queue covers its minimum.

Work of overcommit (over-issued) queues does not use the budget: it is first to be
reclaimed; nor does a starving job, whose room its reservation makes. Any number of jobs of one queue may be admitted in one session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from phalanx.domain.job import JobPhase
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.eviction import fits_deserved, preemption_covers
from phalanx.engine.framework.placement import describe_vector
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EPSILON, JobInfo, Vector


class EnqueueAction(Action):
    """Admits jobs in queue order, then job order."""

    name = "enqueue"
    accepted_args = frozenset({"overcommitFactor"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.overcommit_factor = self.number("overcommitFactor", 1.2, minimum=1.0)

    def execute(self, session: Session) -> None:
        factor = self.overcommit_factor
        snapshot = session.snapshot
        budget = snapshot.total * factor - _charge_earlier_admissions(session)
        for leaf in snapshot.leaf_queues():
            if not leaf.spec.overcommit:
                budget -= leaf.allocated
        # Within a session budgets only shrink and queues only fill, so a job refused for a
        # given (queue, minimum, priority, starving) means every later such job is refused.
        refused: dict[tuple[object, ...], Reason] = {}
        for job in _pending_in_order(session):
            invalid = session.points.job_valid(job)
            if invalid is not None:
                session.record_reason(job, Reason(code=ReasonCode.INVALID, message=invalid))
                continue
            minimum = job.min_request()
            key = (
                job.queue.name,
                minimum.tobytes(),
                job.priority,
                session.points.job_starving(job),
            )
            known = refused.get(key)
            if known is not None:
                session.record_reason(job, known)
                continue
            if not session.points.job_enqueueable(job):
                refused[key] = session.reasons[job.name]  # the rejecting plugin recorded why
                continue
            short = minimum > budget + EPSILON
            if short.any() and not _room_can_be_made(session, job, minimum):
                _record_no_room(session, job, minimum, np.where(short, minimum - budget, 0.0))
                refused[key] = session.reasons[job.name]
                continue
            session.admitted.append(job.name)
            if _uses_budget(session, job):
                budget -= minimum
            for queue in job.queue.ancestors:
                queue.inqueue += minimum


def _charge_earlier_admissions(session: Session) -> Vector:
    """Count jobs admitted earlier and still unplaced as their queues' ``inqueue``.

    Without this, each session would hand out the whole budget (and each queue its whole
    capability) again on top of the jobs admitted before that still wait. Returns what
    of it the cluster budget must cover (see ``_uses_budget``).
    """
    charged = np.zeros(len(session.snapshot.dims))
    for job in session.waiting:
        if job.phase is not JobPhase.QUEUED or job.ready_count >= job.min_available:
            continue
        waiting = np.maximum(job.min_request() - job.allocated, 0.0)
        for queue in job.queue.ancestors:
            queue.inqueue += waiting
        if _uses_budget(session, job):
            charged += waiting
    return charged


def _uses_budget(session: Session, job: JobInfo) -> bool:
    """Whether an admitted job's minimum is charged to the cluster budget.

    Overcommit queues' work is not (it is first to be reclaimed), nor is a starving
    job's: its room comes from its reservation, and charging it would stop every other
    admission - and with it backfill - until it starts.
    """
    return not job.queue.spec.overcommit and not session.points.job_starving(job)


def _room_can_be_made(session: Session, job: JobInfo, minimum: Vector) -> bool:
    """Reclaim, a reservation or preemption could make room for ``minimum``."""
    return (
        fits_deserved(job.queue.ancestors[:-1], minimum)
        or session.points.job_starving(job)
        or preemption_covers(job, minimum)
    )


def _record_no_room(session: Session, job: JobInfo, minimum: Vector, lacking: Vector) -> None:
    session.record_reason(
        job,
        Reason(
            code=ReasonCode.NOT_ADMITTED,
            message=f"not admitted: the cluster is committed (short of "
            f"{describe_vector(session, lacking)} for the job's minimum "
            f"{describe_vector(session, minimum)}) and its queue is at its deserved share; "
            "it is admitted when work finishes, or once it starves (reservation)",
            resource=session.snapshot.dims[int(np.argmax(lacking))],
            queue=job.queue.name,
        ),
    )


def _pending_in_order(session: Session) -> list[JobInfo]:
    jobs = [j for j in session.waiting if j.phase is JobPhase.PENDING]
    return session.ranked(jobs)
