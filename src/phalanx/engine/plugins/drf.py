"""drf: dominant resource fairness between users inside a queue, then between their jobs.

A job's (or user's) dominant share is its largest allocated fraction of any cluster
resource. Jobs of the user with the smallest share go first, then the job with the
smallest share. Shares follow every allocation and eviction of the session (the
snapshot keeps each user's total as tasks move). drf
orders; it does not choose victims (preemption stays by priority).
"""

from __future__ import annotations

import numpy as np

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import CHARGED, JobInfo, Vector


class _Shares:
    """One session's scale (1 / cluster total per resource) and each user's allocation."""

    def __init__(self, session: Session) -> None:
        total = session.snapshot.total
        self.scale = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
        self.users = session.snapshot.user_allocated  # kept current by every task move

    def share(self, row: Vector) -> float:
        """The dominant share of an allocation."""
        return float((row * self.scale).max()) if row.size else 0.0


class DrfPlugin(Plugin[_Shares]):
    """Hierarchical DRF inside each queue: user share, then job share."""

    name = "drf"

    def open(self, session: Session) -> _Shares:
        return _Shares(session)

    def user_order(self, state: _Shares, user: tuple[str, str]) -> float:
        row = state.users.get(user)
        return 0.0 if row is None else state.share(row)

    def job_order(self, state: _Shares, job: JobInfo) -> float:
        if not any(job.counts[status] for status in CHARGED):
            return 0.0  # nothing charged: a waiting job's usual case, without numpy
        return state.share(job.allocated)
