"""priority: higher-priority jobs first; only lower-priority work may be preempted."""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, QueueInfo, TaskInfo


class PriorityPlugin(Plugin[None]):
    """Orders jobs by descending priority and allows preemption of strictly lower priority."""

    name = "priority"
    judges_each = True

    def open(self, session: Session) -> None:
        """Nothing per session: every answer depends on the priorities alone."""

    def job_order(self, state: None, job: JobInfo) -> int:
        return -job.priority

    def queue_order(self, state: None, queue: QueueInfo) -> int:
        return -queue.spec.priority

    def victim_order(self, state: None, task: TaskInfo) -> int:
        return task.job.priority

    def preemptable(
        self, state: None, preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        """Work of strictly lower priority."""
        bar = preemptor.job.priority
        return [task for task in candidates if task.job.priority < bar]
