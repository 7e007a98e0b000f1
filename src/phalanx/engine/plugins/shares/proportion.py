"""proportion: deserved shares from queue weights, water-filled over the queue tree.

Each queue deserves a weight-proportional part of its parent's deserved share, never
more than its capability or its demand (allocated plus pending), never less than its
guarantee; what a queue cannot use is handed to its siblings. A queue at its deserved
share in every resource is overused and gets nothing more in this session.
"""

from __future__ import annotations

import numpy as np

from phalanx.domain.job import JobPhase
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.shares.base import QueueSharePlugin, water_fill
from phalanx.engine.snapshot import EPSILON, QueueInfo, Vector


class ProportionPlugin(QueueSharePlugin):
    """Weight-proportional fair shares, capped by demand and capability."""

    name = "proportion"

    def overused(self, state: Session, queue: QueueInfo) -> bool:
        """At its deserved share in every resource, at some level of the tree."""
        if queue.spec.overcommit:
            return False
        return any(bool((q.deserved <= q.allocated + EPSILON).all()) for q in queue.ancestors[:-1])

    def compute_deserved(self, session: Session) -> None:
        demand = _demands(session)
        root = session.snapshot.root
        root.deserved = root.capability.copy()
        _fill_children(root, demand)


def _demands(session: Session) -> dict[str, Vector]:
    """allocated + pending request per queue, rolled up the tree, capped by capability.

    Queues keep their (rolled-up) allocation as tasks move, and only waiting jobs have
    pending tasks, so this costs what the waiting jobs do, not every job."""
    snapshot = session.snapshot
    demand = {name: queue.allocated.copy() for name, queue in snapshot.queues.items()}
    for job in snapshot.waiting.values():
        if job.phase in (JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED):
            continue
        pending = sum((t.request for t in job.pending_tasks()), np.zeros(len(snapshot.dims)))
        for queue in job.queue.ancestors:
            demand[queue.name] += pending
    for queue in snapshot.queues.values():
        demand[queue.name] = np.minimum(demand[queue.name], queue.capability)
    return demand


def _fill_children(parent: QueueInfo, demand: dict[str, Vector]) -> None:
    children = sorted(parent.children, key=lambda q: q.name)
    if not children:
        return
    weights = np.array([q.spec.weight for q in children], dtype=np.float64)
    caps = np.array(
        [np.minimum(q.capability, np.maximum(demand[q.name], q.guarantee)) for q in children]
    )
    floors = np.array([q.guarantee for q in children])
    shares = water_fill(parent.deserved, weights, caps, floors)
    for queue, deserved in zip(children, shares, strict=True):
        queue.deserved = deserved
        _fill_children(queue, demand)
