"""reclaim: a queue below its deserved share takes back what other queues borrowed.

Victims come from other queues that are reclaimable and above their deserved share in
what the reclaimer needs; overcommitted work goes first (overcommit plugin), no victim
queue drops below its guarantee, the reclaimer never exceeds its own deserved share,
and evictions happen only when the reclaimer's gang is then pipelined in full.
"""

from __future__ import annotations

from phalanx.engine.actions.allocate import candidate_jobs
from phalanx.engine.actions.preempt import evict_for_gang
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EVICTABLE, JobInfo, TaskInfo, TaskStatus


class ReclaimAction(Action):
    """Cross-queue reclaim of borrowed resources."""

    name = "reclaim"

    def execute(self, session: Session) -> None:
        waiting = [j for j in candidate_jobs(session) if j.ready_count < j.min_available]
        waiting.sort(key=session.job_rank)
        for job in waiting:
            if job.counts[TaskStatus.PIPELINED] or job.ready_count >= job.min_available:
                continue
            victims = _other_queue_victims(session, job)
            if victims:
                evict_for_gang(session, job, victims, action="reclaim")


def _other_queue_victims(session: Session, job: JobInfo) -> list[TaskInfo]:
    return [
        t
        for other in session.snapshot.jobs.values()
        if other.queue is not job.queue and other.spec.preemptible and other.queue.spec.reclaimable
        for t in other.tasks
        if t.status in EVICTABLE
    ]
