"""gang: a job runs only when ``minAvailable`` tasks can run together.

A job's allocations are dispatched only when it is ready, kept when it is pipelined,
and discarded otherwise. Unstarted gangs are ordered before started ones, and when
victims are chosen, tasks whose job can shrink (more than minAvailable ready) go
first; evicting below minAvailable always takes the whole job (the eviction helper
guarantees it).
"""

from __future__ import annotations

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, TaskInfo, TaskStatus


class GangPlugin(Plugin[None]):
    """All-or-nothing placement of a job's minimum."""

    name = "gang"

    def open(self, session: Session) -> None:
        """Nothing per session: every answer depends on the job alone."""

    def job_valid(self, state: None, job: JobInfo) -> str | None:
        total = len(job.tasks)
        if job.min_available > total:
            return (
                f"minAvailable is {job.min_available} but the job has only {total} tasks; "
                "fix: lower spec.minAvailable or add replicas"
            )
        return None

    def job_ready(self, state: None, job: JobInfo) -> bool:
        return job.ready_count >= job.min_available

    def job_pipelined(self, state: None, job: JobInfo) -> bool:
        return job.ready_count + job.counts[TaskStatus.PIPELINED] >= job.min_available

    def job_order(self, state: None, job: JobInfo) -> int:
        return 1 if job.ready_count >= job.min_available else 0

    def victim_order(self, state: None, task: TaskInfo) -> int:
        """Tasks whose job can shrink first."""
        job = task.job
        return 0 if job.ready_count > job.min_available else 1
