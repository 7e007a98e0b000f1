"""allocate: place admitted jobs, queue by queue, job by job, gang by gang.

The queue with the smallest share goes next; within it the first job by job order.
A job's tasks are placed as a gang (see ``try_job``): dispatched when ready, kept
when pipelined, discarded otherwise. Reservations held for starving jobs are not
used here (backfill may use them for jobs that end in time).
"""

from __future__ import annotations

from collections import defaultdict

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.ordering import LazyQueue
from phalanx.engine.framework.placement import try_job
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, QueueInfo


class AllocateAction(Action):
    """Greedy gang placement in fair-share order."""

    name = "allocate"

    def execute(self, session: Session) -> None:
        by_queue: dict[str, list[JobInfo]] = defaultdict(list)
        for job in candidate_jobs(session):
            by_queue[job.queue.name].append(job)
        job_key = session.points.job_order.key
        waiting = {
            name: LazyQueue(jobs, job_key, lambda j: (j.creation_time, j.name))
            for name, jobs in by_queue.items()
        }
        queues = LazyQueue(
            [session.snapshot.queues[name] for name in sorted(waiting)],
            session.points.queue_order.key,
            lambda q: q.name,
        )
        while queues:
            queue = queues.pop()
            jobs = waiting[queue.name]
            if session.points.overused(queue):
                _record_overused(session, queue, jobs)
                continue
            job = jobs.pop()
            try_job(session, job, withheld=session.withheld_for(job))
            if jobs:
                queues.push(queue)


def candidate_jobs(session: Session) -> list[JobInfo]:
    """Admitted, valid jobs with pending tasks, in a stable order."""
    found = []
    for job in session.snapshot.jobs.values():
        if job.pending_count == 0 or not session.is_admitted(job):
            continue
        invalid = session.points.job_valid(job)
        if invalid is not None:
            session.record_reason(job, Reason(code=ReasonCode.INVALID, message=invalid))
            continue
        found.append(job)
    return sorted(found, key=lambda j: (j.creation_time, j.name))


def _record_overused(session: Session, queue: QueueInfo, jobs: LazyQueue[JobInfo]) -> None:
    while jobs:
        job = jobs.pop()
        session.record_reason(
            job,
            Reason(
                code=ReasonCode.QUEUE_LIMIT,
                message=f"queue {session.queue_label(queue)} has used its deserved share; "
                "fix: wait, raise its weight, or let reclaim return borrowed resources",
                queue=queue.name,
            ),
            replace=False,
        )
