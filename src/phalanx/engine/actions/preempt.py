"""preempt: inside a queue, a waiting gang evicts lower-priority work to fit.

Victims come from other jobs of the same queue that the plugins accept (priority:
strictly lower priority); room is made for the whole gang or not at all
(``phalanx.engine.placement.eviction.gangs``: minAvailable, confinement, queue limits).

``victimBudget`` (a number, default unbounded) caps what a preemptor may evict: the
victims together may hold at most that many times what its pending tasks ask for
together, in every resource (so none of a resource they do not ask for). With 1, a job
never evicts more than it will use: a 1-GPU task does not take an 8-GPU job down, and a
CPU-only task no GPU job, it waits for a better chance, while a gang of two 4-GPU tasks
may take down a lower-priority gang of two 4-GPU tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.placement.eviction.gangs import evict_for_gang
from phalanx.engine.placement.eviction.victims import same_queue_victims
from phalanx.engine.snapshot import TaskStatus


class PreemptAction(Action):
    """Priority preemption within each queue."""

    name = "preempt"
    accepted_args = frozenset({"victimBudget"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.budget = self.number("victimBudget", math.inf)

    def execute(self, session: Session) -> None:
        waiting = [j for j in session.candidate_jobs() if j.ready_count < j.min_available]
        victims = partial(same_queue_victims, session)
        for job in session.ranked(waiting):
            if (
                job.counts[TaskStatus.PIPELINED] or job.ready_count >= job.min_available
            ):  # pipelined already
                continue
            evict_for_gang(session, job, victims, action="preempt", budget=self.budget)
