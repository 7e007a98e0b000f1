"""Colocation on the local executor: offline tasks pause while online ones are busy.

``Colocation`` runs ``executors.colocation.OfflineThrottle`` on the controller's tick
(the executor is not thread-safe: the tick is its one thread) and journals what it did,
one event per job and change: ``Throttled`` when its tasks were paused (naming the
online load and the watermark), ``Resumed`` when they run again. Inference replicas are
online (``serviceClass: online``), so a busy service pauses colocated training on the
host and lets it go on once the load falls below the watermark less the hysteresis.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Final

from phalanx.control.controllers.core import Core
from phalanx.executors.colocation import OfflineThrottle, OnlineLoad, PausableExecutor

log = logging.getLogger(__name__)

#: The job event kinds it writes.
THROTTLED: Final = "Throttled"
RESUMED: Final = "Resumed"


class Colocation:
    """See the module docstring; ``signal`` is the online load, 0..1 (default: the online
    tasks' CPU, and their GPUs' utilisation where NVML sees them)."""

    def __init__(
        self,
        executor: PausableExecutor,
        watermark: float,
        *,
        signal: Callable[[], float] | None = None,
    ) -> None:
        self._executor = executor
        self._load = signal if signal is not None else OnlineLoad(executor)
        self.watermark = watermark
        self.last_load = 0.0
        self._warned = False
        self._throttle = OfflineThrottle(executor, watermark=watermark, signal=self._read)

    def _read(self) -> float:
        """The load now; the last one read when it cannot be read (said once)."""
        try:
            self.last_load = self._load()
        except Exception as error:  # psutil refused a process: keep the last reading
            if not self._warned:
                self._warned = True
                log.warning("colocation cannot read the online load (%s); keeping the last", error)
        return self.last_load

    def tick(self, core: Core) -> None:
        """Read the load once, pause or resume offline tasks, and journal the changes."""
        before = self._throttle.paused
        self._throttle.tick()
        after = self._throttle.paused
        load = f"{self.last_load:.0%}"
        self._journal(
            core,
            after - before,
            THROTTLED,
            f"paused: the online load on its host ({load}) is over the colocation "
            f"watermark ({self.watermark:.0%}); it goes on once the load falls",
        )
        live = {(task.job, task.task) for task in self._executor.running()}
        self._journal(
            core,
            (before - after) & live,
            RESUMED,
            f"resumed: the online load on its host ({load}) fell below the watermark",
        )

    @staticmethod
    def _journal(core: Core, tasks: Iterable[tuple[str, str]], kind: str, said: str) -> None:
        by_job: dict[str, list[str]] = defaultdict(list)
        for job, task in tasks:
            by_job[job].append(task)
        for job, names in sorted(by_job.items()):
            rows = core.rows.get(job)
            if rows is not None:
                core.journal.event(rows.id, core.now, kind, f"{', '.join(sorted(names))} {said}")
