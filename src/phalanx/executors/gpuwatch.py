"""A node's GPU readings, taken on its executor's poll (``GpuSource`` for the executor).

``GpuWatch.tick`` asks its ``GpuSampler`` for a reading when one is due (every few
seconds), with each live task's cards. The pids of a task are looked up (one walk of
the process table per reading) only where it shares a card with another task: only
there does the reading need per-process figures to tell them apart. Samples wait in
``take`` until the controller (or a Ray node's agent) collects them; at most ``KEEP``
wait, the oldest dropped first, so nobody collecting costs no memory.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from phalanx.telemetry.readings import NodeSample, TaskCards
from phalanx.telemetry.sampler import GpuSampler, process_trees

if TYPE_CHECKING:
    from phalanx.executors.local import RunningTask

#: Samples kept for collection at most.
KEEP: Final = 64


class GpuWatch:
    """See the module docstring."""

    def __init__(self, sampler: GpuSampler) -> None:
        self.sampler = sampler
        self._waiting: deque[NodeSample] = deque(maxlen=KEEP)

    def tick(self, running: Sequence[RunningTask], now: float) -> None:
        """Take a reading when one is due."""
        if not self.sampler.due(now):
            return
        holding = [task for task in running if task.gpus]
        given = Counter(gpu for task in holding for gpu in set(task.gpus))
        sharing = [task for task in holding if any(given[gpu] > 1 for gpu in task.gpus)]
        trees = process_trees(task.pid for task in sharing)
        cards = [
            TaskCards(
                job=task.job, task=task.task, gpus=task.gpus, pids=trees.get(task.pid, frozenset())
            )
            for task in holding
        ]
        sample = self.sampler.sample(cards, now)
        if sample is not None:
            self._waiting.append(sample)

    def take(self) -> list[NodeSample]:
        """The samples taken since the last call, oldest first."""
        taken = list(self._waiting)
        self._waiting.clear()
        return taken

    def utilisation(self, tasks: Sequence[tuple[str, str]]) -> float | None:
        """The busiest of ``tasks``' cards at the latest reading, 0..1; None without one."""
        latest = self.sampler.latest
        if latest is None:
            return None
        wanted = set(tasks)
        rates = [use.utilisation for use in latest.tasks if (use.job, use.task) in wanted]
        return max(rates, default=0.0) / 100
