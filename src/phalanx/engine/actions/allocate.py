"""allocate: place admitted jobs, queue by queue, user by user, job by job, gang by gang.

The queue with the smallest share goes next; within it the user whose first job ranks
first by the job order of tiers before user order (priority), then by user order (drf:
the smallest dominant share); then that user's first job by job order. A job's
tasks are placed as a gang (see ``try_job``): dispatched when ready, kept when
pipelined, discarded otherwise. Reservations held for starving jobs are not used
here (backfill may use them for jobs that end in time).
"""

from __future__ import annotations

from collections import defaultdict

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.ordering import LazyQueue
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.placement.jobs import try_job
from phalanx.engine.snapshot import JobInfo, QueueInfo

User = tuple[str, str]  # (queue name, user name)


class AllocateAction(Action):
    """Greedy gang placement in fair-share order."""

    name = "allocate"

    def execute(self, session: Session) -> None:
        points = session.points
        by_user: dict[User, list[JobInfo]] = defaultdict(list)
        for job in session.candidate_jobs():
            by_user[(job.queue.name, job.user)].append(job)
        jobs_of = {
            user: LazyQueue(jobs, session.job_key, lambda j: (j.creation_time, j.name))
            for user, jobs in by_user.items()
        }
        users_by_queue: dict[str, list[User]] = defaultdict(list)
        for user in sorted(jobs_of):
            users_by_queue[user[0]].append(user)

        def user_key(user: User) -> tuple[object, ...]:
            return session.user_rank(user, jobs_of[user].peek())

        users_of = {
            name: LazyQueue(users, user_key, lambda u: u[1])
            for name, users in users_by_queue.items()
        }
        queues = LazyQueue(
            [session.snapshot.queues[name] for name in sorted(users_of)],
            points.queue_order.key,
            lambda q: q.name,
        )
        while queues:
            queue = queues.pop()
            users = users_of[queue.name]
            if points.overused(queue):
                _record_overused(
                    session,
                    queue,
                    [jobs_of[user] for user in sorted(jobs_of) if user[0] == queue.name],
                )
                continue
            user = users.pop()
            jobs = jobs_of[user]
            job = jobs.pop()
            try_job(session, job, withheld=session.withheld_for(job))
            if jobs:
                users.push(user)
            if users:
                queues.push(queue)


def _record_overused(session: Session, queue: QueueInfo, waiting: list[LazyQueue[JobInfo]]) -> None:
    """Every waiting job of ``queue`` is told that its queue has used its share, and how much."""
    reason = Reason(
        code=ReasonCode.QUEUE_LIMIT,
        message=f"queue {session.queue_label(queue)} has used its deserved share "
        f"({session.describe(queue.deserved)}; allocated "
        f"{session.describe(queue.allocated)}); fix: wait, raise its weight, "
        "or let reclaim return borrowed resources",
        queue=queue.name,
    )
    for jobs in waiting:
        while jobs:
            session.record_reason(jobs.pop(), reason, replace=False)
