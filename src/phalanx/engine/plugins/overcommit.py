"""overcommit: the over-issued queue of the seeds.

Jobs of a queue marked ``overcommit`` may be admitted and placed beyond its quota
(its capability, or its deserved share when it has no capability); the queue-share plugins
let them through. The work beyond quota - the most recently started tasks first - is
overcommitted, and overcommitted tasks are the first victims of reclaim.
"""

from __future__ import annotations

import numpy as np

from phalanx.engine.framework.plugin import Hooks, Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EPSILON, EVICTABLE, QueueInfo, TaskInfo


class OvercommitPlugin(Plugin):
    """Puts overcommitted tasks first in victim order."""

    name = "overcommit"

    def open(self, session: Session, hooks: Hooks) -> None:
        marked: set[int] | None = None

        def first_victims(task: TaskInfo) -> int:
            nonlocal marked
            if (
                marked is None
            ):  # computed on first use: queue-share plugins have set deserved by then
                marked = set()
                for queue in session.snapshot.leaf_queues():
                    if queue.spec.overcommit:
                        marked.update(_overcommitted(queue))
            return 0 if id(task) in marked else 1

        hooks.victim_order(first_victims)


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
