"""priority: higher-priority jobs first; only lower-priority work may be preempted."""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import TaskInfo


class PriorityPlugin(Plugin):
    """Orders jobs by descending priority and allows preemption of strictly lower priority."""

    name = "priority"

    def open(self, session: Session, hooks: Hooks) -> None:
        hooks.job_order(lambda job: -job.priority)
        hooks.queue_order(lambda queue: -queue.spec.priority)
        hooks.victim_order(lambda task: task.job.priority)
        hooks.preemptable(_lower_priority, each=True)


def _lower_priority(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    bar = preemptor.job.priority
    return [task for task in candidates if task.job.priority < bar]
