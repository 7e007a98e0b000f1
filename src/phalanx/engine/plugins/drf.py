"""drf: dominant resource fairness between users inside a queue, then between their jobs.

A job's (or user's) dominant share is its largest allocated fraction of any cluster
resource. Jobs of the user with the smallest share go first, then the job with the
smallest share. Shares follow every allocation and eviction of the session. drf
orders; it does not choose victims (preemption stays by priority).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, TaskInfo, Vector


class DrfPlugin(Plugin):
    """Hierarchical DRF inside each queue: user share, then job share."""

    name = "drf"

    def open(self, session: Session, hooks: Hooks) -> None:
        total = session.snapshot.total
        scale = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
        users: dict[tuple[str, str], Vector] = {}
        for job in session.snapshot.jobs.values():
            key = (job.queue.name, job.user)
            if key not in users:
                users[key] = np.zeros_like(total)
            users[key] += job.allocated

        def share(row: Vector) -> float:
            return float((row * scale).max()) if row.size else 0.0

        def user_key(user: tuple[str, str]) -> float:
            row = users.get(user)
            return 0.0 if row is None else share(row)

        def job_key(job: JobInfo) -> float:
            return share(job.allocated)

        def charge(sign: float) -> Callable[[TaskInfo], None]:
            def apply(task: TaskInfo) -> None:
                users[(task.job.queue.name, task.job.user)] += sign * task.request

            return apply

        hooks.user_order(user_key)
        hooks.job_order(job_key)
        hooks.on_allocate(charge(1.0))
        hooks.on_deallocate(charge(-1.0))
