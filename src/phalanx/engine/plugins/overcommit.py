"""overcommit: the over-issued queue of the seeds.

Jobs of a queue marked ``overcommit`` may be admitted and placed beyond its quota
(its capability, or its deserved share when it has no capability); the queue-share plugins
let them through. The work beyond quota - the most recently started tasks first - is
overcommitted, and overcommitted tasks are the first victims of reclaim.
"""

from __future__ import annotations

import numpy as np

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EPSILON, EVICTABLE, QueueInfo, Snapshot, TaskInfo


class _Marked:
    """One session's overcommitted tasks, found on first use: the queue-share plugins
    have set the queues' deserved shares by then."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.tasks: set[int] | None = None  # ids of the overcommitted tasks

    def get(self) -> set[int]:
        """Ids of the overcommitted tasks of every overcommit queue."""
        if self.tasks is None:
            self.tasks = set()
            for queue in self.snapshot.leaf_queues():
                if queue.spec.overcommit:
                    self.tasks.update(_overcommitted(queue))
        return self.tasks


class OvercommitPlugin(Plugin[_Marked]):
    """Puts overcommitted tasks first in victim order."""

    name = "overcommit"

    def open(self, session: Session) -> _Marked:
        return _Marked(session.snapshot)

    def victim_order(self, state: _Marked, task: TaskInfo) -> int:
        return 0 if id(task) in state.get() else 1


def _overcommitted(queue: QueueInfo) -> set[int]:
    quota = np.where(np.isfinite(queue.capability), queue.capability, queue.deserved)
    remaining = queue.allocated.copy()
    running = [t for job in queue.jobs for t in job.tasks if t.status in EVICTABLE]
    running.sort(key=lambda t: (-(t.start_time or 0.0), t.name))
    marked: set[int] = set()
    for task in running:
        if not bool((remaining > quota + EPSILON).any()):
            break
        marked.add(id(task))
        remaining -= task.request
    return marked
