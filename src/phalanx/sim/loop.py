"""The virtual clock: a heap of (time, priority, seq, event), as in SimPy's core.

Events at the same time run by priority (lower first), then in scheduling order, so a
run is deterministic. Time never goes backwards.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import Generic, TypeVar

from phalanx.domain.errors import EngineInvariantError

E = TypeVar("E")


class Priority(IntEnum):
    """Order of events that share a time: freed resources before arrivals before sessions."""

    RELEASE = 0  # tasks exit, nodes fail or recover
    ARRIVAL = 1  # jobs are submitted
    SESSION = 2  # the scheduler looks at the result


class EventLoop(Generic[E]):
    """Schedules events and hands them out in time order."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[tuple[float, int, int, E]] = []  # seq is unique: events never compare
        self._seq = 0

    def schedule(self, time: float, priority: Priority, event: E) -> None:
        """Add ``event`` at ``time`` (not before now)."""
        if time < self.now:
            raise EngineInvariantError(f"cannot schedule at {time} before now={self.now}")
        self._seq += 1
        heapq.heappush(self._heap, (time, int(priority), self._seq, event))

    def pop(self) -> E:
        """The next event; advances ``now`` to its time."""
        self.now, _, _, event = heapq.heappop(self._heap)
        return event

    def peek_time(self) -> float | None:
        """When the next event happens, or None."""
        return self._heap[0][0] if self._heap else None

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
