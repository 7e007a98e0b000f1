"""Online/offline colocation: offline tasks yield the host while online load is high.

Online tasks (serving, interactive) and offline ones (batch training) share a host. An
``OfflineThrottle`` reads a load signal each ``tick``: above the watermark it pauses
(SIGSTOP) every running offline task, and once the load falls below the watermark minus
the hysteresis it resumes (SIGCONT) those it paused. A paused task keeps its memory,
GPU context and files; it is neither failed nor lost, only frozen.

The default signal, ``OnlineLoad``, measures the CPU used by the online tasks' process
trees, as a fraction of this host's cores, and, where the executor reads its GPUs
(``executors.gpuwatch``), the online tasks' own utilisation of their cards at the latest
reading; it returns the larger.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import psutil

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import ServiceClass
from phalanx.executors.gpuwatch import GpuWatch
from phalanx.executors.local import RunningTask

#: The GPU utilisation of the given (job, task)s, 0..1 (the busiest), or None unread.
GpuUtilisation = Callable[[Sequence[tuple[str, str]]], float | None]


class PausableExecutor(Protocol):
    """What colocation needs from an executor: its live tasks, and pause/resume."""

    def running(self, workload: ServiceClass | None = None) -> list[RunningTask]: ...

    def pause(self, job: str, task: str) -> bool: ...

    def resume(self, job: str, task: str) -> bool: ...

    @property
    def gpus(self) -> GpuWatch | None: ...


class OfflineThrottle:
    """Pauses offline tasks while ``signal()`` is above ``watermark``.

    Guarantees: after a ``tick`` that read more than ``watermark``, every running
    offline task that is not being stopped is paused; after a tick that read less than
    ``watermark - hysteresis``, every task this throttle paused runs again. In between,
    nothing changes (the band keeps it from flapping). Tasks paused by someone else are
    never resumed by the throttle.
    """

    def __init__(
        self,
        executor: PausableExecutor,
        *,
        watermark: float,
        signal: Callable[[], float] | None = None,
        hysteresis: float = 0.1,
    ) -> None:
        if watermark <= 0:
            raise InvalidInput(
                f"{watermark} is not positive", field="watermark", fix="e.g. 0.7 of the host"
            )
        if not 0 <= hysteresis < watermark:
            raise InvalidInput(
                f"{hysteresis} is not in [0, watermark)",
                field="hysteresis",
                fix="a small band below the watermark, e.g. 0.1",
            )
        self._executor = executor
        self._watermark = watermark
        self._hysteresis = hysteresis
        self._signal = signal if signal is not None else OnlineLoad(executor)
        self._throttled = False
        self._paused: set[tuple[str, str]] = set()

    @property
    def throttled(self) -> bool:
        """True while offline tasks are held paused."""
        return self._throttled

    @property
    def paused(self) -> frozenset[tuple[str, str]]:
        """``(job, task)`` of the tasks this throttle holds paused."""
        return frozenset(self._paused)

    def tick(self) -> bool:
        """Read the signal once and pause or resume offline tasks; returns ``throttled``."""
        load = self._signal()
        if load > self._watermark:
            self._throttled = True
        elif load < self._watermark - self._hysteresis:
            self._throttled = False
        offline = self._executor.running(ServiceClass.OFFLINE)
        live = {(task.job, task.task) for task in offline}
        self._paused &= live  # tasks that ended are no longer ours to resume
        if self._throttled:
            for task in offline:
                key = (task.job, task.task)
                if not task.paused and not task.stopping and self._executor.pause(*key):
                    self._paused.add(key)
        else:
            for key in sorted(self._paused):
                self._executor.resume(*key)
            self._paused.clear()
        return self._throttled


class OnlineLoad:
    """The load online tasks put on this host, 0..1 (1: every core, or one GPU, fully busy).

    CPU is read with ``psutil.cpu_percent`` over each online task's process tree since
    the previous call, so the first call after a process appears counts it as idle.
    ``gpu`` defaults to the executor's readings (``GpuWatch.utilisation``: the online
    tasks' own share of their cards); no GPU term where it reads none.
    """

    def __init__(
        self,
        executor: PausableExecutor,
        *,
        cores: int | None = None,
        gpu: GpuUtilisation | None = None,
    ) -> None:
        self._executor = executor
        self._cores = cores or len(os.sched_getaffinity(0)) or 1
        watch = executor.gpus
        self._gpu = gpu if gpu is not None else (None if watch is None else watch.utilisation)
        # psutil measures CPU between two calls on the same Process object: keep them.
        self._processes: dict[Any, Any] = {}

    def __call__(self) -> float:
        online = self._executor.running(ServiceClass.ONLINE)
        cpu = self._cpu_percent(task.pid for task in online) / 100 / self._cores
        holding = [(task.job, task.task) for task in online if task.gpus]
        gpu = self._gpu(holding) if self._gpu is not None and holding else None
        return max(cpu, gpu or 0.0)

    def _cpu_percent(self, roots: Iterable[int]) -> float:
        total = 0.0
        seen: dict[Any, Any] = {}
        for root in roots:
            try:
                leader = psutil.Process(root)
                family = [leader, *leader.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for process in family:
                # psutil.Process compares by pid *and* start time: a reused pid is a new key.
                cached = seen[process] = self._processes.get(process, process)
                try:
                    total += float(cached.cpu_percent(interval=None))
                except psutil.NoSuchProcess:
                    continue
        self._processes = seen
        return total
