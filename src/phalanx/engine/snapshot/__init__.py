"""The cluster as the engine sees it: node state in numpy arrays, the queue tree, jobs
and their tasks as mutable holders, kept consistent by ``Snapshot.move``.

A snapshot lives as long as its owner: one session for a snapshot built from domain
values (``Snapshot.build``), the whole run of a driver for the one its ``ClusterState``
keeps up to date across cycles. One concern a module:

- ``units``: dimensions and engine units of a row;
- ``tasks``: task statuses, ``RoleInfo``, ``TaskInfo``, ``JobInfo``;
- ``queues``: ``QueueInfo`` and the queue tree;
- ``requests``: task requests interned by value;
- ``labels``: node label columns;
- ``cardbridge``: the cards a task holds while on a node;
- ``jobs``: reading jobs in (and the watchers told of them);
- ``cluster``: ``Snapshot`` itself: node arrays, ``move``, fork and revert.
"""

from phalanx.engine.snapshot.cluster import Snapshot
from phalanx.engine.snapshot.jobs import JobWatcher
from phalanx.engine.snapshot.queues import QueueInfo
from phalanx.engine.snapshot.requests import Requests
from phalanx.engine.snapshot.tasks import (
    CHARGED,
    EVICTABLE,
    ON_NODE,
    READY,
    STATUS_OF_PHASE,
    JobInfo,
    RoleInfo,
    TaskInfo,
    TaskStatus,
)
from phalanx.engine.snapshot.units import ENGINE_UNITS, EPSILON, Vector, dimensions

__all__ = [
    "CHARGED",
    "ENGINE_UNITS",
    "EPSILON",
    "EVICTABLE",
    "ON_NODE",
    "READY",
    "STATUS_OF_PHASE",
    "JobInfo",
    "JobWatcher",
    "QueueInfo",
    "Requests",
    "RoleInfo",
    "Snapshot",
    "TaskInfo",
    "TaskStatus",
    "Vector",
    "dimensions",
]
