"""The event loop hands out events by time, then priority, then scheduling order."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import EngineInvariantError
from phalanx.sim.loop import EventLoop, Priority


def test_ties_break_on_priority_then_order() -> None:
    loop: EventLoop[str] = EventLoop()
    loop.schedule(5.0, Priority.SESSION, "session")
    loop.schedule(5.0, Priority.ARRIVAL, "arrival-1")
    loop.schedule(1.0, Priority.SESSION, "early")
    loop.schedule(5.0, Priority.ARRIVAL, "arrival-2")
    loop.schedule(5.0, Priority.RELEASE, "release")
    popped = [loop.pop() for _ in range(len(loop))]
    assert popped == ["early", "release", "arrival-1", "arrival-2", "session"]
    assert loop.now == 5.0 and not loop


def test_time_never_goes_backwards() -> None:
    loop: EventLoop[str] = EventLoop(start=10.0)
    with pytest.raises(EngineInvariantError):
        loop.schedule(9.0, Priority.ARRIVAL, "late")
