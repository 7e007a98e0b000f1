"""Growth: the replicas of elastic roles above what their owners asked for.

The elastic action lends idle room to elastic jobs; any waiting gang may take it back,
whatever its priority or queue. So growth is counted as free by admission (as
overcommit queues' work is) and offered first when room is made for a waiting gang.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from phalanx.engine.snapshot import EVICTABLE, JobInfo, TaskInfo, Vector


def growth_of(job: JobInfo) -> list[TaskInfo]:
    """The tasks of ``job``'s elastic role above ``max(replicas, min_replicas)``, the
    highest index first (none for a job without an elastic role)."""
    role = job.spec.elastic_role()
    if role is None or role.elastic is None:
        return []
    mine = sorted((t for t in job.tasks if t.role.name == role.name), key=lambda t: -t.index)
    surplus = len(mine) - role.kept_replicas
    return mine[: max(surplus, 0)]


def lent(jobs: Iterable[JobInfo]) -> list[TaskInfo]:
    """Every evictable (bound or running) task of growth among ``jobs``."""
    return [t for job in jobs for t in growth_of(job) if t.status in EVICTABLE]


def lent_total(jobs: Iterable[JobInfo], ndims: int) -> Vector:
    """What the growth of ``jobs`` holds, summed over its tasks."""
    total = np.zeros(ndims)
    for task in lent(jobs):
        total += task.request
    return total
