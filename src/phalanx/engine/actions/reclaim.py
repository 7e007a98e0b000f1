"""reclaim: a queue below its deserved share takes back what other queues borrowed.

Victims come from other queues that are reclaimable and above their deserved share in
what the reclaimer needs; overcommitted work goes first (overcommit plugin), no victim
queue drops below its guarantee, the reclaimer never exceeds its own deserved share,
and evictions happen only when the reclaimer's gang is then pipelined in full. A job
left short of room whose queue already has its deserved share is told so: reclaim
cannot help it, only idle or released resources (or a larger share) can.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from phalanx.engine.decisions import ReasonCode
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.placement.eviction.gangs import evict_for_gang
from phalanx.engine.placement.eviction.victims import other_queue_victims
from phalanx.engine.snapshot import EPSILON, JobInfo, TaskStatus


class ReclaimAction(Action):
    """Cross-queue reclaim of borrowed resources."""

    name = "reclaim"

    def execute(self, session: Session) -> None:
        waiting = [j for j in session.candidate_jobs() if j.ready_count < j.min_available]
        waiting = session.ranked(waiting)
        victims = partial(other_queue_victims, session)
        for job in waiting:
            if job.counts[TaskStatus.PIPELINED] or job.ready_count >= job.min_available:
                continue
            if not evict_for_gang(session, job, victims, action="reclaim"):
                _explain_no_share(session, job)


def _explain_no_share(session: Session, job: JobInfo) -> None:
    """Add to a short-of-room reason that the job's queue already has its deserved share."""
    reason = session.reasons.get(job.name)
    shares = session.shares
    if shares is None or reason is None:  # no queue has a deserved share to speak of
        return
    if reason.code not in (ReasonCode.INSUFFICIENT, ReasonCode.GANG):
        return
    minimum = job.min_request()
    asked = minimum > 0
    for queue in job.queue.ancestors[:-1]:
        deserved = shares.deserved[queue.name]
        over = asked & (queue.allocated + minimum > deserved + EPSILON)
        if over.any():
            share = session.describe(np.where(over, deserved, 0.0))
            session.record_reason(
                job,
                replace(
                    reason,
                    message=f"{reason.message}; queue {session.queue_label(queue)} already has "
                    f"its deserved share ({share}), so nothing is reclaimed for it; fix: wait for "
                    "idle resources, or raise the queue's deserved share",
                    queue=queue.name,
                ),
            )
            return
