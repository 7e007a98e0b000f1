"""gang: a job runs only when ``minAvailable`` tasks can run together.

A job's allocations are dispatched only when it is ready, kept when it is pipelined,
and discarded otherwise. Unstarted gangs are ordered before started ones, and when
victims are chosen, tasks whose job can shrink (more than minAvailable ready) go
first; evicting below minAvailable always takes the whole job (the eviction helper
guarantees it).
"""

from __future__ import annotations

from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, TaskInfo, TaskStatus


class GangPlugin(Plugin):
    """All-or-nothing placement of a job's minimum."""

    name = "gang"

    def open(self, session: Session, hooks: Hooks) -> None:
        hooks.job_valid(_valid)
        hooks.job_ready(lambda job: job.ready_count >= job.min_available)
        hooks.job_pipelined(
            lambda job: job.ready_count + job.counts[TaskStatus.PIPELINED] >= job.min_available
        )
        hooks.job_order(lambda job: 1 if job.ready_count >= job.min_available else 0)
        hooks.victim_order(_shrinkable_first)


def _valid(job: JobInfo) -> str | None:
    total = len(job.tasks)
    if job.min_available > total:
        return (
            f"minAvailable is {job.min_available} but the job has only {total} tasks; "
            "fix: lower spec.minAvailable or add replicas"
        )
    return None


def _shrinkable_first(task: TaskInfo) -> int:
    job = task.job
    return 0 if job.ready_count > job.min_available else 1
