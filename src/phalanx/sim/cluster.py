"""SimCluster: an Executor whose tasks run on a virtual clock.

A job makes progress while at least ``min_available`` of its tasks run. When it drops
below that (an eviction, a lost node), its run stops and the progress since its last
checkpoint is lost; it resumes from that checkpoint when placed again. A job whose run
reaches its duration ends: every task exits with code 0. A run that reaches the job's
walltime first is killed: every task exits stopped with code 137.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.sim.workload import WorkloadJob

KILLED = 137


@dataclass(slots=True)
class _Run:
    """Progress bookkeeping of one job."""

    spec: WorkloadJob
    gang: int
    done: float = 0.0  # seconds of work kept (up to the last checkpoint, across runs)
    started: float | None = None  # when the current run began
    running: dict[str, str] = field(default_factory=dict)  # task -> node
    stopping: set[str] = field(default_factory=set)
    attempt: int = 0  # bumped when a run starts, so stale ends are ignored

    def kept(self, elapsed: float) -> float:
        """Work kept after ``elapsed`` seconds of the current run: up to the last checkpoint."""
        interval = self.spec.checkpoint_interval
        if interval is None or interval <= 0:
            return self.done
        return self.done + (elapsed // interval) * interval


class SimCluster:
    """Runs simulated tasks; implements ``phalanx.executors.base.Executor``."""

    def __init__(self, jobs: Mapping[str, WorkloadJob]) -> None:
        self._jobs = jobs
        self._runs: dict[str, _Run] = {}
        self._events: list[tuple[float, int, TaskEvent]] = []
        self._ends: list[tuple[float, int, str, int]] = []  # (time, seq, job, attempt)
        self._seq = 0

    # -- Executor ---------------------------------------------------------------------

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        for bind in binds:
            run = self._run(bind.job)
            run.running[bind.task] = bind.node
            self._emit(
                now,
                TaskEvent(
                    kind=TaskEventKind.STARTED,
                    time=now,
                    job=bind.job,
                    task=bind.task,
                    node=bind.node,
                ),
            )
        for job in sorted({b.job for b in binds}):
            self._maybe_begin(self._runs[job], now)

    def stop(self, evictions: Sequence[Evict], *, now: float, grace: float) -> None:
        for evict in evictions:
            run = self._runs.get(evict.job)
            if run is None or evict.task not in run.running or evict.task in run.stopping:
                continue
            run.stopping.add(evict.task)
            node = run.running[evict.task]
            self._emit(
                now + grace,
                TaskEvent(
                    kind=TaskEventKind.EXITED,
                    time=now + grace,
                    job=evict.job,
                    task=evict.task,
                    node=node,
                    exit_code=143,
                    stopped=True,
                ),
            )
        for job in sorted({e.job for e in evictions}):
            run = self._runs.get(job)
            if run is not None:
                self._maybe_pause(run, now)

    def poll(self, *, now: float) -> list[TaskEvent]:
        self._finish_due(now)
        found = []
        while self._events and self._events[0][0] <= now:
            found.append(heapq.heappop(self._events)[2])
        for event in found:
            if event.kind is not TaskEventKind.STARTED:
                self._forget(event.job, event.task)
        return found

    # -- simulation hooks -----------------------------------------------------------------

    def next_event_time(self) -> float | None:
        """When the next task event will happen, or None."""
        while self._ends and not self._current(self._ends[0]):
            heapq.heappop(self._ends)  # an interrupted run's end: it will not happen
        times = [t for t, _, _ in self._events[:1]] + [t for t, _, _, _ in self._ends[:1]]
        return min(times) if times else None

    def lose_node(self, node: str, *, now: float) -> None:
        """Every task on ``node`` is lost now."""
        for run in sorted(self._runs.values(), key=lambda r: r.spec.name):
            lost = sorted(task for task, where in run.running.items() if where == node)
            for task in lost:
                run.stopping.add(task)
                self._emit(
                    now,
                    TaskEvent(
                        kind=TaskEventKind.LOST, time=now, job=run.spec.name, task=task, node=node
                    ),
                )
            if lost:
                self._maybe_pause(run, now)

    # -- internals ------------------------------------------------------------------------

    def _run(self, job: str) -> _Run:
        run = self._runs.get(job)
        if run is None:
            spec = self._jobs[job]
            run = self._runs[job] = _Run(spec=spec, gang=spec.job.gang_size)
        return run

    def _active(self, run: _Run) -> int:
        return len(run.running) - len(run.stopping)

    def _maybe_begin(self, run: _Run, now: float) -> None:
        if run.started is not None or self._active(run) < run.gang:
            return
        run.started = now
        run.attempt += 1
        remaining = max(run.spec.duration - run.done, 0.0)
        walltime = run.spec.job.walltime
        end = now + (remaining if walltime is None else min(remaining, walltime))
        self._seq += 1
        heapq.heappush(self._ends, (end, self._seq, run.spec.name, run.attempt))

    def _maybe_pause(self, run: _Run, now: float) -> None:
        if run.started is None or self._active(run) >= run.gang:
            return
        run.done = run.kept(now - run.started)
        run.started = None
        run.attempt += 1  # the scheduled end no longer applies

    def _finish_due(self, now: float) -> None:
        while self._ends and self._ends[0][0] <= now:
            end, _, job, attempt = heapq.heappop(self._ends)
            run = self._runs.get(job)
            if run is None or run.attempt != attempt or run.started is None:
                continue
            completed = end - run.started >= run.spec.duration - run.done - 1e-9
            code = 0 if completed else KILLED
            for task, node in sorted(run.running.items()):
                if task not in run.stopping:
                    run.stopping.add(task)
                    self._emit(
                        end,
                        TaskEvent(
                            kind=TaskEventKind.EXITED,
                            time=end,
                            job=job,
                            task=task,
                            node=node,
                            exit_code=code,
                            stopped=not completed,
                        ),
                    )
            run.done = run.spec.duration if completed else run.kept(end - run.started)
            run.started = None

    def _current(self, end: tuple[float, int, str, int]) -> bool:
        run = self._runs.get(end[2])
        return run is not None and run.attempt == end[3] and run.started is not None

    def _forget(self, job: str, task: str) -> None:
        run = self._runs.get(job)
        if run is None:
            return
        run.running.pop(task, None)
        run.stopping.discard(task)

    def _emit(self, time: float, event: TaskEvent) -> None:
        self._seq += 1
        heapq.heappush(self._events, (time, self._seq, event))
