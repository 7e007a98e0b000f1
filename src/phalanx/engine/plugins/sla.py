"""sla: a job that has waited past its starvation threshold is starving.

The threshold comes from the job, else its queue, else this plugin's ``waitingTime``
(seconds; unset means jobs without their own threshold never starve). Starving jobs
are ordered first, and the backfill action gives them reservations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo


class SlaPlugin(Plugin[float]):
    """Marks jobs that waited too long as starving."""

    name = "sla"
    accepted_args = frozenset({"waitingTime"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.waiting_time: float | None = (
            self.number("waitingTime", 0.0) if "waitingTime" in self.args else None
        )

    def open(self, session: Session) -> float:
        """The session's time."""
        return session.now

    def job_starving(self, state: float, job: JobInfo) -> bool:
        if job.ready_count >= job.min_available:
            return False
        threshold = job.spec.starvation_threshold
        if threshold is None:
            threshold = job.queue.spec.starvation_threshold
        if threshold is None:
            threshold = self.waiting_time
        return threshold is not None and state - job.pending_since >= threshold

    def job_order(self, state: float, job: JobInfo) -> int:
        """Starving jobs first."""
        return 0 if self.job_starving(state, job) else 1
