"""Each job's use of its cards, summed up over windows of a fixed width (a minute).

Nodes read their cards every few seconds; keeping every reading of every job would
cost a row per task per reading. ``Windows`` folds the readings of each job into one
``GpuUse`` per window: how many card readings, the mean and the peak utilisation of
any one card, and the mean and peak memory of all its cards together (each node's
cards averaged over that node's readings, then summed across its nodes: a job on two
nodes is read twice per round). A window closes at the first reading past its end,
or when its job is closed. Pure: time comes from the readings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from phalanx.telemetry.readings import TaskGpuUse

#: Seconds of readings one window sums up.
WINDOW: Final = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuUse:
    """One job's use of its cards from ``start`` to ``end`` (the first and last reading)."""

    start: float
    end: float
    samples: int  # card readings (a job of 4 cards read 3 times: 12)
    cards: int  # the most cards it held at one reading of all its nodes
    utilisation: float  # percent, mean over its card readings
    utilisation_peak: float  # percent, the busiest card at any reading
    memory: float  # bytes, mean of all its cards together
    memory_peak: float  # bytes, peak of all its cards together

    @staticmethod
    def merged(windows: Sequence[GpuUse]) -> GpuUse | None:
        """One use over all of ``windows`` (None for none): means weighted by readings."""
        if not windows:
            return None
        samples = sum(w.samples for w in windows)
        spans = sum(max(w.end - w.start, 1e-9) for w in windows)
        return GpuUse(
            start=min(w.start for w in windows),
            end=max(w.end for w in windows),
            samples=samples,
            cards=max(w.cards for w in windows),
            utilisation=sum(w.utilisation * w.samples for w in windows) / max(samples, 1),
            utilisation_peak=max(w.utilisation_peak for w in windows),
            memory=sum(w.memory * max(w.end - w.start, 1e-9) for w in windows) / spans,
            memory_peak=max(w.memory_peak for w in windows),
        )


@dataclass(slots=True)
class _Node:
    readings: int = 0
    cards: int = 0
    memory_sum: float = 0.0
    memory_peak: float = 0.0


@dataclass(slots=True)
class _Open:
    start: float
    end: float
    card_readings: int = 0
    utilisation_sum: float = 0.0
    utilisation_peak: float = 0.0
    nodes: dict[str, _Node] = field(default_factory=dict)

    def use(self) -> GpuUse:
        return GpuUse(
            start=self.start,
            end=self.end,
            samples=self.card_readings,
            cards=sum(node.cards for node in self.nodes.values()),
            utilisation=self.utilisation_sum / max(self.card_readings, 1),
            utilisation_peak=self.utilisation_peak,
            memory=sum(n.memory_sum / max(n.readings, 1) for n in self.nodes.values()),
            memory_peak=sum(node.memory_peak for node in self.nodes.values()),
        )


class Windows:
    """The open window of each job, and the windows closed since the last ``closed``."""

    def __init__(self, width: float = WINDOW) -> None:
        self.width = width
        self._open: dict[str, _Open] = {}
        self._closed: list[tuple[str, GpuUse]] = []

    def add(self, job: str, node: str, at: float, uses: Sequence[TaskGpuUse]) -> None:
        """One reading, on ``node`` at ``at``, of the job's tasks there."""
        cards = sum(len(use.gpus) for use in uses)
        if not cards:
            return
        window = self._open.get(job)
        if window is not None and at >= window.start + self.width:
            self._closed.append((job, window.use()))
            window = None
        if window is None:
            window = self._open[job] = _Open(start=at, end=at)
        window.end = max(window.end, at)
        window.card_readings += cards
        for use in uses:
            window.utilisation_sum += use.utilisation * len(use.gpus)
            window.utilisation_peak = max(window.utilisation_peak, use.utilisation)
        here = window.nodes.setdefault(node, _Node())
        memory = float(sum(use.memory for use in uses))
        here.readings += 1
        here.cards = max(here.cards, cards)
        here.memory_sum += memory
        here.memory_peak = max(here.memory_peak, memory)

    def close(self, job: str) -> None:
        """The job holds no card any more: its open window closes."""
        window = self._open.pop(job, None)
        if window is not None:
            self._closed.append((job, window.use()))

    def closed(self) -> list[tuple[str, GpuUse]]:
        """The windows closed since the last call, in the order they closed."""
        closed, self._closed = self._closed, []
        return closed

    def current(self, job: str) -> GpuUse | None:
        """The job's open window, if it has one."""
        window = self._open.get(job)
        return None if window is None else window.use()

    def jobs(self) -> frozenset[str]:
        """The jobs with an open window."""
        return frozenset(self._open)
