"""What a fork of a snapshot records so that ``Snapshot.revert`` can undo it exactly, as
cluster-autoscaler's ClusterSnapshot forks: every task move since the fork (its task, its
status, node and cards before the move), and the queues' per-session values.

Undo is exact because node arrays hold whole engine units (``units``): moving a task back
restores every sum bit for bit, and its cards are taken back in reverse order, so the
cards it held are free again when it asks for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from phalanx.engine.snapshot.queues import QueueInfo
from phalanx.engine.snapshot.tasks import TaskInfo, TaskStatus
from phalanx.engine.snapshot.units import Vector

#: One move: the task, and its status, node and cards before it.
Move = tuple[TaskInfo, TaskStatus, int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Fork:
    """One open fork: where its moves start in the journal, and its queues' values."""

    start: int
    queues: tuple[tuple[QueueInfo, Vector, Vector, Vector], ...]

    @classmethod
    def open(cls, start: int, queues: Iterable[QueueInfo]) -> Fork:
        """A fork whose moves start at journal index ``start``."""
        return cls(
            start,
            tuple((q, q.inqueue.copy(), q.deserved.copy(), q.capability.copy()) for q in queues),
        )

    def restore_queues(self) -> None:
        """Put back each queue's admission marks, deserved share and capability (sessions
        set them as they open: see the ``capacity``, ``proportion`` and quota plugins)."""
        for queue, inqueue, deserved, capability in self.queues:
            queue.inqueue[:] = inqueue
            queue.deserved = deserved
            queue.capability = capability
