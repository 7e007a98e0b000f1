"""enqueue: admit pending jobs (Pending -> Queued) whose minimum their queue and the cluster can hold.

The cluster check lets admitted-but-unplaced work reach ``overcommitFactor`` times the
schedulable capacity (Volcano's default 1.2), so a burst does not admit more than could
ever start. Any number of jobs of one queue may be admitted in one session.
"""

from __future__ import annotations

import numpy as np

from phalanx.domain.job import JobPhase
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.placement import describe_vector
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EPSILON, JobInfo


class EnqueueAction(Action):
    """Admits jobs in queue order, then job order."""

    name = "enqueue"

    def execute(self, session: Session) -> None:
        factor = float(self.args.get("overcommitFactor", 1.2))
        snapshot = session.snapshot
        budget = snapshot.total * factor - snapshot.used.sum(axis=0)
        budget -= sum((q.inqueue for q in snapshot.leaf_queues()), np.zeros(len(snapshot.dims)))
        for job in _pending_in_order(session):
            invalid = session.points.job_valid(job)
            if invalid is not None:
                session.record_reason(job, Reason(code=ReasonCode.INVALID, message=invalid))
                continue
            minimum = job.min_request()
            short = minimum > budget + EPSILON
            if short.any():
                session.record_reason(
                    job,
                    Reason(
                        code=ReasonCode.NOT_ADMITTED,
                        message=f"the cluster cannot hold the job's minimum {describe_vector(session, minimum)}"
                        f" on top of running and admitted work (short of "
                        f"{describe_vector(session, np.where(short, minimum - budget, 0))}); it is admitted "
                        "when work finishes",
                        resource=snapshot.dims[int(np.argmax(short))],
                    ),
                )
                continue
            if not session.points.job_enqueueable(job):
                continue  # the rejecting plugin recorded why
            session.admitted.append(job.name)
            budget -= minimum
            for queue in job.queue.ancestors:
                queue.inqueue += minimum


def _pending_in_order(session: Session) -> list[JobInfo]:
    jobs = [j for j in session.snapshot.jobs.values() if j.phase is JobPhase.PENDING]
    queue_key = session.points.queue_order.key
    job_key = session.points.job_order.key
    return sorted(
        jobs, key=lambda j: (queue_key(j.queue), j.queue.name, job_key(j), j.creation_time, j.name)
    )
