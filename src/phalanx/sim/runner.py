"""The simulation's controller: arrivals, sessions, task events, lifecycle, metrics, events.jsonl.

It plays the role the control plane's controllers play in production: it owns job and
task state (in a ``ClusterState``), runs the engine's sessions on it, hands Decisions to
the executor (a ``SimCluster``) and turns the executor's events into state changes. The
same seed, workload and config give byte-identical events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TextIO

import numpy as np

from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine.decisions import Decisions, Evict
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.registry import Registry
from phalanx.engine.snapshot import ON_NODE, TaskInfo, TaskStatus
from phalanx.engine.state import ClusterState
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.sim.cluster import SimCluster
from phalanx.sim.fragmentation import FragmentationProbe
from phalanx.sim.loop import EventLoop, Priority
from phalanx.sim.metrics import JobRecord, Metrics
from phalanx.sim.workload import Workload, WorkloadJob


@dataclass(frozen=True, slots=True, kw_only=True)
class SimOptions:
    """How the simulated scheduler and cluster behave."""

    period: float = 60.0  # a session this often while jobs wait
    max_period: float = 3600.0  # the longest wait between periodic sessions when nothing changes
    trigger_delay: float = 1.0  # and this long after an arrival or a release
    grace: float = 0.0  # seconds an evicted task takes to stop
    until: float | None = None  # stop the clock here (jobs still running stay unfinished)
    seed: int = 0
    node_mtbf: float | None = None  # mean seconds between failures of one node; None: none fail
    node_mttr: float = 3600.0  # mean seconds to repair a failed node
    oracle_runtime: bool = False  # give the scheduler each job's true duration as its estimate
    fragmentation_every: float = 600.0  # seconds between samples of GPU fragmentation (FGD)
    #: colocation SLA: offline work is held while a service on its node is busier than this
    #: (a share of 0..1 of the service's GPUs); None: offline work runs at full speed
    sla_watermark: float | None = None


@dataclass(frozen=True, slots=True)
class _Arrival:
    job: WorkloadJob


@dataclass(frozen=True, slots=True)
class _Wake:
    at: float  # a wake replaced by an earlier one is stale and does nothing


@dataclass(frozen=True, slots=True)
class _Session:
    at: float  # a session replaced by an earlier request is stale and does not run


@dataclass(frozen=True, slots=True)
class _NodeChange:
    node: str
    up: bool


_Event = _Arrival | _Wake | _Session | _NodeChange


class Simulation:
    """One run of a workload through the engine on a simulated cluster."""

    def __init__(
        self,
        nodes: Sequence[Node],
        workload: Workload,
        config: SchedulerConfig,
        *,
        queues: Sequence[Queue] | None = None,
        options: SimOptions = SimOptions(),
        events_out: TextIO | None = None,
        registry: Registry | None = None,
        on_event: Callable[[dict[str, object]], None] | None = None,
        on_session: Callable[[float, Decisions], None] | None = None,
    ) -> None:
        """``events_out`` receives events.jsonl; ``on_event`` gets each of its rows as a
        dict and ``on_session`` each session's time and Decisions once they are applied."""
        self.options = options
        self.config = config
        self.registry = registry
        self.queues = tuple(queues if queues is not None else workload.queues)
        self.state = ClusterState(nodes, self.queues)
        self.jobs = {w.name: w for w in workload.jobs}
        self.cluster = SimCluster(self.jobs, watermark=self.options.sla_watermark)
        self.loop: EventLoop[_Event] = EventLoop(
            start=min((w.submit_time for w in workload.jobs), default=0.0)
        )
        self.metrics = Metrics(
            total_gpus=float(sum(node.capacity.get("gpu") for node in nodes)),
            total_cpu=float(sum(node.capacity.get("cpu") for node in nodes)),
            queue_guarantees={q.name: float(q.guarantee.get("gpu")) for q in self.queues},
            queue_deserved={
                q.name: float((q.deserved or q.guarantee).get("gpu")) for q in self.queues
            },
        )
        self._out = events_out
        self._on_event = on_event
        self._on_session = on_session
        self._tasks: dict[str, TaskInfo] = {}
        self._session_at: float | None = None
        self._idle_sessions = 0
        self._wake_at: float | None = None
        self._rng = np.random.default_rng(options.seed)
        self._node_names = [n.name for n in nodes]
        self._fragmentation = FragmentationProbe.of(self.state.snapshot, workload)
        self._sampled_at: float | None = None

    # -- driving --------------------------------------------------------------------------

    def run(self, progress: Callable[[float, int], None] | None = None) -> Metrics:
        """Play every event up to ``until``; returns the metrics.

        ``progress`` is told (now, jobs finished) every few thousand events.
        """
        wall = time.perf_counter()
        for workload_job in self.jobs.values():
            self.loop.schedule(workload_job.submit_time, Priority.ARRIVAL, _Arrival(workload_job))
        self._arrivals_left = len(self.jobs)
        if self.options.node_mtbf:
            for node in self._node_names:
                self._schedule_failure(node, self.loop.now)
        until = self.options.until
        handled = 0
        while self.loop and (self._arrivals_left or self.state.snapshot.jobs):
            next_time = self.loop.peek_time()
            if until is not None and next_time is not None and next_time > until:
                break
            self._handle(self.loop.pop())
            self._schedule_wake()
            handled += 1
            if progress is not None and handled % 2000 == 0:
                progress(
                    self.loop.now, sum(r.outcome == "finished" for r in self.metrics.jobs.values())
                )
        self.metrics.end_time = max(
            self.metrics.end_time, min(self.loop.now, until or self.loop.now)
        )
        self.wall_seconds = time.perf_counter() - wall
        return self.metrics

    def _handle(self, event: _Event) -> None:
        now = self.loop.now
        if isinstance(event, _Arrival):
            self._arrive(event.job, now)
        elif isinstance(event, _Wake):
            if event.at != self._wake_at:
                return
            self._wake_at = None
            for task_event in self.cluster.poll(now=now):
                self._on_task_event(task_event, now)
        elif isinstance(event, _Session):
            if event.at != self._session_at:
                return
            self._session_at = None
            self._session(now)
        else:
            self._node_change(event, now)

    def _triggered(self, now: float) -> None:
        """Something happened: a session soon, if any job waits for one."""
        if self.state.snapshot.waiting:
            self._request_session(now + self.options.trigger_delay)

    def _request_session(self, at: float) -> None:
        if self._session_at is None or at < self._session_at:
            self._session_at = at
            self.loop.schedule(at, Priority.SESSION, _Session(at))

    def _schedule_wake(self) -> None:
        due = self.cluster.next_event_time()
        if due is not None and (self._wake_at is None or due < self._wake_at):
            self._wake_at = max(due, self.loop.now)
            self.loop.schedule(self._wake_at, Priority.RELEASE, _Wake(self._wake_at))

    # -- arrivals and sessions -----------------------------------------------------------

    def _arrive(self, workload_job: WorkloadJob, now: float) -> None:
        self._arrivals_left -= 1
        job = workload_job.job
        if self.options.oracle_runtime:
            job = replace(job, runtime_estimate=workload_job.duration)
        info = self.state.add_job(job)
        gang = job.gang_size
        gpus = sum(r.resources.get("gpu") * r.replicas for r in job.roles) * min(
            1.0, gang / max(job.replicas, 1)
        )
        self.metrics.submitted(
            JobRecord(
                name=job.name,
                queue=job.queue,
                user=job.user,
                gpus=gpus,
                duration=workload_job.duration,
                submit=now,
            )
        )
        self._emit(now, "submit", job.name)
        if info is not None:
            for task in info.tasks:
                self._tasks[task.name] = task
        self._triggered(now)

    def _session(self, now: float) -> None:
        started = time.perf_counter()
        decisions = self.state.cycle(self.config, now=now, registry=self.registry)
        self.metrics.session_seconds.append(time.perf_counter() - started)
        self._apply(decisions, now)
        if self._on_session is not None:
            self._on_session(now, decisions)
        self._sample_fragmentation(now)
        self._plan_periodic(
            now, decided=bool(decisions.binds or decisions.evictions or decisions.admitted)
        )

    def _sample_fragmentation(self, now: float) -> None:
        """Record GPU fragmentation after a session, at most every ``fragmentation_every`` s."""
        due = self._sampled_at is None or now - self._sampled_at >= self.options.fragmentation_every
        if self._fragmentation is not None and due:
            self._sampled_at = now
            self.metrics.fragmentation(now, self._fragmentation.measure(self.state.snapshot))

    def _plan_periodic(self, now: float, *, decided: bool) -> None:
        """Schedule the next periodic session, backing off while sessions decide nothing.

        Periodic sessions catch what time alone changes (a job starts starving, a job's
        attained service crosses a level); events bring their own sessions. So each session
        that decides nothing doubles the wait, up to ``max_period``, and one that decides
        something resets it. With nothing running, nothing scheduled and nothing decided,
        nothing can change: periodic sessions stop.
        """
        if not self.state.snapshot.waiting:
            return
        busy = bool(self.state.snapshot.task_count.any()) or len(self.loop) > 0
        if not decided and not busy:
            return
        period, cap = self.options.period, self.options.max_period
        if decided:
            self._idle_sessions = 0
        elif self._idle_sessions < 60 and period * 2.0**self._idle_sessions < cap:
            self._idle_sessions += 1  # stops doubling at the cap: no overflow however long
        wait = min(period * 2.0**self._idle_sessions, cap)
        self._request_session(now + wait)

    def _apply(self, decisions: Decisions, now: float) -> None:
        for admit in decisions.admitted:
            self.state.set_phase(admit.job, JobPhase.QUEUED)
        for reservation in decisions.reservations:
            self._emit(
                now,
                "reserve",
                reservation.job,
                nodes=list(reservation.nodes),
                start=reservation.start_time,
            )
        for job in _in_order(e.job for e in decisions.evictions):
            evictions = [e for e in decisions.evictions if e.job == job]
            self._evict(job, evictions, now)
        for job in _in_order(b.job for b in decisions.binds):
            binds = [b for b in decisions.binds if b.job == job]
            for bind in binds:
                task = self._tasks[bind.task]
                self.state.set_task(
                    task, TaskPhase.BOUND, bind.node, start_time=now, gpus=bind.gpus
                )
                self.metrics.allocation(
                    now, task.job.queue.name, task.job.user, task.role.resources, 1.0
                )
            self.state.set_phase(job, JobPhase.RUNNING)
            if self._out is not None or self._on_event is not None:
                rows = [self._task_row(self._tasks[b.task], b.node) for b in binds]
                self._emit(now, "start", job, tasks=rows)
            self.cluster.start(binds, now=now)

    def _evict(self, job: str, evictions: Sequence[Evict], now: float) -> None:
        for evict in evictions:
            self.state.set_task(self._tasks[evict.task], TaskPhase.RELEASING)
        record = self.metrics.jobs[job]
        record.preemptions += 1
        self.metrics.preemptions += 1
        self._emit(
            now,
            "evict",
            job,
            tasks=[e.task for e in evictions],
            by=evictions[0].by,
            action=evictions[0].action,
        )
        self.cluster.stop(evictions, now=now, grace=self.options.grace)
        self._restart_if_broken(job, now, reason="gang restart after eviction")

    # -- task events -----------------------------------------------------------------------

    def _on_task_event(self, event: TaskEvent, now: float) -> None:
        task = self._tasks.get(event.task)
        if task is None:
            return
        if event.kind is TaskEventKind.STARTED:
            if task.status is TaskStatus.BOUND:
                self.state.set_task(task, TaskPhase.RUNNING, event.node, start_time=now)
                if task.job.ready_count >= task.job.min_available:
                    self.metrics.started(now, task.job.name)
            return
        if task.status in ON_NODE:
            self.metrics.allocation(
                now, task.job.queue.name, task.job.user, task.role.resources, -1.0
            )
        if event.kind is TaskEventKind.LOST:
            self._lost(task, now)
        elif event.stopped and event.exit_code == 137:
            self._finish_task(task, TaskPhase.FAILED, now, outcome="killed", ev="kill")
        elif event.stopped:
            self.state.set_task(task, TaskPhase.PENDING, now=now)
            if task.job.ready_count < task.job.min_available:
                self.state.set_phase(task.job.name, JobPhase.PENDING, pending_since=now)
        else:
            phase = TaskPhase.SUCCEEDED if event.exit_code == 0 else TaskPhase.FAILED
            self._finish_task(
                task,
                phase,
                now,
                outcome="finished" if event.exit_code == 0 else "failed",
                ev="finish" if event.exit_code == 0 else "fail",
            )
        self._triggered(now)

    def _finish_task(
        self, task: TaskInfo, phase: TaskPhase, now: float, *, outcome: str, ev: str
    ) -> None:
        self.state.set_task(task, phase, now=now)
        job = task.job
        if any(t.status in ON_NODE for t in job.tasks):
            return
        ended = [t.name for t in job.tasks if t.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)]
        self._emit(now, ev, job.name, tasks=ended)
        self.metrics.ended(now, job.name, outcome)
        for t in job.tasks:
            self._tasks.pop(t.name, None)
        self.state.remove_job(job.name)

    def _lost(self, task: TaskInfo, now: float) -> None:
        self.state.set_task(task, TaskPhase.PENDING, now=now)
        job = task.job
        record = self.metrics.jobs[job.name]
        record.restarts += 1
        self._emit(now, "fail", job.name, tasks=[task.name], reason="node lost")
        if record.restarts > job.spec.max_retry:
            self._give_up(job.name, now)
            return
        self.state.set_phase(job.name, JobPhase.PENDING, pending_since=now)
        self._restart_if_broken(job.name, now, reason="gang restart after a lost task")

    def _restart_if_broken(self, job: str, now: float, *, reason: str) -> None:
        """A gang below its minimum restarts whole: stop its other running tasks."""
        info = self.state.job(job)
        alive = [t for t in info.tasks if t.status in (TaskStatus.BOUND, TaskStatus.RUNNING)]
        if not alive or len(alive) >= info.min_available:
            return
        stops = self._stop_requests(alive, action="restart", reason=reason)
        for task in alive:
            self.state.set_task(task, TaskPhase.RELEASING)
        self._emit(now, "evict", job, tasks=[s.task for s in stops], by=job, action="restart")
        self.cluster.stop(stops, now=now, grace=self.options.grace)

    def _stop_requests(self, tasks: Sequence[TaskInfo], *, action: str, reason: str) -> list[Evict]:
        """Stop requests the controller itself issues for ``tasks`` (not a session's evictions)."""
        nodes = self.state.snapshot.nodes
        return [
            Evict(
                job=t.job.name,
                task=t.name,
                node=nodes[t.node].name,
                action=action,
                by=t.job.name,
                reason=reason,
            )
            for t in tasks
        ]

    def _give_up(self, job: str, now: float) -> None:
        info = self.state.job(job)
        stops = self._stop_requests(
            [t for t in info.tasks if t.status in ON_NODE], action="fail", reason="out of retries"
        )
        self.cluster.stop(stops, now=now, grace=0.0)
        self._emit(now, "fail", job, tasks=[s.task for s in stops], reason="out of retries")
        for task in info.tasks:
            if task.status in ON_NODE:
                self.metrics.allocation(now, info.queue.name, info.user, task.role.resources, -1.0)
        self.metrics.ended(now, job, "failed")
        for t in info.tasks:
            self._tasks.pop(t.name, None)
        self.state.remove_job(job)

    # -- node failures ----------------------------------------------------------------------

    def _schedule_failure(self, node: str, now: float) -> None:
        assert self.options.node_mtbf is not None
        self.loop.schedule(
            now + float(self._rng.exponential(self.options.node_mtbf)),
            Priority.RELEASE,
            _NodeChange(node, up=False),
        )

    def _node_change(self, event: _NodeChange, now: float) -> None:
        self.state.snapshot.set_schedulable(self.state.snapshot.node_index[event.node], event.up)
        if event.up:
            self._schedule_failure(event.node, now)
        else:
            self.cluster.lose_node(event.node, now=now)
            self.loop.schedule(
                now + float(self._rng.exponential(self.options.node_mttr)),
                Priority.RELEASE,
                _NodeChange(event.node, up=True),
            )
        self._emit(now, "node-up" if event.up else "node-down", "", node=event.node)
        self._triggered(now)

    # -- output -------------------------------------------------------------------------------

    def _task_row(self, task: TaskInfo, node: str) -> dict[str, object]:
        resources = {name: _number(v) for name, v in task.role.resources.items() if v}
        return {"task": task.name, "node": node, "gpus": list(task.gpus), "resources": resources}

    def _emit(self, now: float, ev: str, job: str, **extra: object) -> None:
        if self._out is None and self._on_event is None:
            return
        record = self.metrics.jobs.get(job)
        row: dict[str, object] = {
            "t": float(round(now, 6)),
            "ev": ev,
            "job": job,
            "queue": record.queue if record else "",
            "user": record.user if record else "",
        }
        row.update(extra)
        if self._out is not None:
            self._out.write(json.dumps(row, separators=(",", ":")) + "\n")
        if self._on_event is not None:
            self._on_event(row)


def _in_order(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
