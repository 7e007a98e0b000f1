"""The simulation's controller: arrivals, sessions, task events, metrics, events.jsonl.

It plays the role the control plane's controller plays in production, with the same
parts: the engine's sessions decide, the one ``Lifecycle`` (``phalanx.engine.lifecycle``)
turns Decisions, the executor's events and the passing of time into effects, and this
driver carries them out: it writes them to ``events.jsonl`` and the metrics, and hands
starts and stops to the executor (a ``SimCluster``). Jobs that carry a recorded GPU
utilisation are read as nodes read GPUs, and verdicts on idle ones go through the
lifecycle's one rule (``phalanx.sim.idle``). The same seed, workload and config give
byte-identical events.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TextIO

import numpy as np

from phalanx.domain.errors import EngineInvariantError, InvalidInput
from phalanx.domain.job import HOLDS_RESOURCES, Job, JobPhase, TaskPhase
from phalanx.domain.node import GPU_MODEL_LABEL, Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine.decisions import Decisions
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.registry import Registry
from phalanx.engine.lifecycle import (
    BACKOFF,
    MAX_BACKOFF,
    Effect,
    Ending,
    Event,
    EventKind,
    JobChanged,
    JobCounters,
    Lifecycle,
    Resized,
    RetryPolicy,
    Start,
    Stop,
    TaskChanged,
    TaskEventKind,
    Waiting,
    act_on,
)
from phalanx.engine.plugins.fairshare import half_life_of
from phalanx.engine.snapshot import TaskStatus
from phalanx.engine.state import ClusterState
from phalanx.sim.cluster import SimCluster
from phalanx.sim.data import CacheModel, DataPlane, names_read, pin_datasets
from phalanx.sim.fragmentation import FragmentationProbe
from phalanx.sim.idle import IdleReplay
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
    backoff: float = BACKOFF  # a failed job's first retry waits this long, each further twice
    max_backoff: float = MAX_BACKOFF
    until: float | None = None  # stop the clock here (jobs still running stay unfinished)
    seed: int = 0
    node_mtbf: float | None = None  # mean seconds between failures of one node; None: none fail
    node_mttr: float = 3600.0  # mean seconds to repair a failed node
    oracle_runtime: bool = False  # give the scheduler each job's true duration as its estimate
    fragmentation_every: float = 600.0  # seconds between samples of GPU fragmentation (FGD)
    #: colocation SLA: offline work is held while a service on its node is busier than this
    #: (a share of 0..1 of the service's GPUs); None: offline work runs at full speed
    sla_watermark: float | None = None
    #: sessions only at whole multiples of ``period`` (every period while jobs wait; an
    #: arrival or a release waits for the next one), as in Pollux's simulator, which
    #: schedules at fixed intervals; False: a session ``trigger_delay`` after each event
    fixed_period: bool = False
    #: every node's dataset cache and remote bandwidth (used when jobs read datasets)
    data: CacheModel = field(default_factory=CacheModel)
    #: seconds between readings of jobs' recorded GPU utilisation under queues' idleGpus;
    #: None: 1/30 of the shortest window, within 5..60 s (``phalanx.sim.idle``)
    idle_every: float | None = None


@dataclass(frozen=True, slots=True)
class _Arrival:
    job: WorkloadJob


@dataclass(frozen=True, slots=True)
class _Call:
    action: Callable[[float], None]


@dataclass(frozen=True, slots=True)
class _Wake:
    at: float  # a wake replaced by an earlier one is stale and does nothing


@dataclass(frozen=True, slots=True)
class _Session:
    at: float  # a session replaced by an earlier request is stale and does not run


@dataclass(frozen=True, slots=True)
class _IdleRead:
    at: float  # a reading replaced by an earlier one is stale and does nothing


@dataclass(frozen=True, slots=True)
class _NodeChange:
    node: str
    up: bool
    planned: bool = (
        False  # the workload's: its repair is planned too, and no random failure follows
    )


_Event = _Arrival | _Call | _Wake | _Session | _IdleRead | _NodeChange


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
        on_job_end: Callable[[JobChanged], None] | None = None,
        on_preempted: Callable[[Event], None] | None = None,
    ) -> None:
        """``events_out`` receives events.jsonl; ``on_event`` gets each of its rows as a
        dict and ``on_session`` each session's time and Decisions once they are applied;
        ``on_job_end`` each job's final phase (Succeeded, Failed, Cancelled) once its
        metrics record it (a driver that submits work as the run goes reacts there), and
        ``on_preempted`` the Evicted event of each preemption or reclaim a session decided."""
        self.options = options
        self.config = config
        self.registry = registry
        self.queues = tuple(queues if queues is not None else workload.queues)
        self.life = Lifecycle(
            ClusterState(nodes, self.queues, half_life=half_life_of(config)),
            RetryPolicy(backoff=options.backoff, max_backoff=options.max_backoff),
        )
        self.jobs = {w.name: w for w in workload.jobs}
        self._node_failures = workload.node_failures
        #: elastic jobs are elastic only under a policy that rescales them (``elastic``
        #: action); under any other they run at the size they ask for, by duration
        self.elastic = any(action.name == "elastic" for action in config.actions)
        self.data = _data_plane(nodes, workload, options.data)
        self.cluster = SimCluster(
            self.jobs,
            watermark=self.options.sla_watermark,
            elastic=self.elastic,
            data=self.data,
            gpu_models={node.name: node.labels.get(GPU_MODEL_LABEL, "") for node in nodes},
        )
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
        self.metrics.data = None if self.data is None else self.data.stats
        self.metrics.gpu_types = self.cluster.gpu_types
        #: the readings of jobs' GPU utilisation, when a queue has an idle policy
        self.idle = IdleReplay.of(self.queues, options.idle_every)
        self.metrics.idle = None if self.idle is None else self.idle.stats
        self._read_at: float | None = None
        self._out = events_out
        self._on_event = on_event
        self._on_session = on_session
        self._on_job_end = on_job_end
        self._on_preempted = on_preempted
        self._initial = workload.jobs
        self._arrivals_left = 0  # arrivals and calls scheduled and not yet handled
        self._resources: dict[str, dict[str, Resources]] = {}  # per live job: per role
        self._session_at: float | None = None
        self._resized_at: float | None = None  # the last session that resized a job
        self._idle_sessions = 0
        self._wake_at: float | None = None
        self._rng = np.random.default_rng(options.seed)
        self._node_names = [n.name for n in nodes]
        self._fragmentation = FragmentationProbe.of(self.state.snapshot, workload)
        self._sampled_at: float | None = None

    @property
    def state(self) -> ClusterState:
        """The engine state the lifecycle keeps."""
        return self.life.state

    # -- driving --------------------------------------------------------------------------

    def run(self, progress: Callable[[float, int], None] | None = None) -> Metrics:
        """Play every event up to ``until``; returns the metrics.

        ``progress`` is told (now, jobs finished) every few thousand events.
        """
        wall = time.perf_counter()
        for workload_job in self._initial:
            self.loop.schedule(workload_job.submit_time, Priority.ARRIVAL, _Arrival(workload_job))
        self._arrivals_left += len(self._initial)
        if self.options.node_mtbf:
            for node in self._node_names:
                self._schedule_failure(node, self.loop.now)
        for failure in self._node_failures:
            down = _NodeChange(failure.node, up=False, planned=True)
            self.loop.schedule(failure.at, Priority.RELEASE, down)
            up = _NodeChange(failure.node, up=True, planned=True)
            self.loop.schedule(failure.at + failure.repair, Priority.RELEASE, up)
        until = self.options.until
        handled = 0
        while self.loop and (self._arrivals_left or self.life.jobs):
            next_time = self.loop.peek_time()
            if until is not None and next_time is not None and next_time > until:
                break
            self._handle(self.loop.pop())
            self._pass_reports()
            self._pass_datasets()
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

    def submit(self, job: WorkloadJob) -> None:
        """Add ``job``, arriving at its submit time (not before now): for drivers that
        submit work as the run goes, from ``on_job_end`` or a ``call_at`` action."""
        if job.name in self.jobs:
            raise EngineInvariantError(f"job {job.name} was submitted already")
        self.jobs[job.name] = job  # the cluster reads durations from this very mapping
        self.loop.schedule(job.submit_time, Priority.ARRIVAL, _Arrival(job))
        self._arrivals_left += 1

    def cancel(self, job: str, message: str) -> None:
        """Cancel ``job`` now, as the control plane's cancel does (its tasks stop, then it
        is Cancelled). Not from inside a hook: from a ``call_at`` action."""
        now = self.loop.now
        self._carry_out(self.life.cancel(job, message, now=now))
        self._triggered(now)

    def call_at(self, at: float, action: Callable[[float], None]) -> None:
        """Call ``action(now)`` at time ``at`` (not before now), among arrivals; the run
        goes on at least until then."""
        self.loop.schedule(at, Priority.ARRIVAL, _Call(action))
        self._arrivals_left += 1

    def _handle(self, event: _Event) -> None:
        now = self.loop.now
        if isinstance(event, _Arrival):
            self._arrive(event.job, now)
        elif isinstance(event, _Call):
            self._arrivals_left -= 1
            event.action(now)
        elif isinstance(event, _Wake):
            if event.at != self._wake_at:
                return
            self._wake_at = None
            released = False  # a task ended or a job's time ran out: room may have changed
            for task_event in self.cluster.poll(now=now):
                self._carry_out(self.life.on_event(task_event, now=now))
                released = released or task_event.kind is not TaskEventKind.STARTED
            advanced = self.life.advance(now=now)
            self._carry_out(advanced)
            if self._pass_datasets() or released or advanced:
                self._triggered(now)  # a fill landed: a job requiring its data may fit
        elif isinstance(event, _Session):
            if event.at != self._session_at:
                return
            self._session_at = None
            self._session(now)
        elif isinstance(event, _IdleRead):
            if event.at == self._read_at:
                self._read_at = None
                self._read_idle(now)
        else:
            self._node_change(event, now)

    def _pass_reports(self) -> None:
        """Hand what elastic jobs reported of their training to the lifecycle."""
        for name, progress in self.cluster.reports():
            self.life.report(name, progress)

    def _pass_datasets(self) -> bool:
        """Show the engine what each node's cache holds now (``Node.datasets``); whether
        any changed."""
        if self.data is None:
            return False
        changes = self.data.changes()
        snapshot = self.state.snapshot
        for node, held in changes:
            snapshot.set_datasets(snapshot.node_index[node], held)
        return bool(changes)

    def _wants_sessions(self) -> bool:
        """Whether a session could decide anything: a job waits, or (under an elastic
        policy) an elastic job runs that may be resized."""
        snapshot = self.state.snapshot
        return bool(snapshot.waiting) or (self.elastic and bool(snapshot.elastic))

    def _triggered(self, now: float) -> None:
        """Something happened: a session soon, if any job waits for one."""
        if not self._wants_sessions():
            return
        if self.options.fixed_period:  # the next whole period, this instant if it is one
            period = self.options.period
            self._request_session(math.ceil(now / period) * period)
        else:
            self._request_session(now + self.options.trigger_delay)

    def _request_session(self, at: float) -> None:
        if self._session_at is None or at < self._session_at:
            self._session_at = at
            self.loop.schedule(at, Priority.SESSION, _Session(at))

    def _schedule_wake(self) -> None:
        due = self.cluster.next_event_time()
        deadline = self.life.next_deadline()  # a retry backoff or a walltime ends
        if deadline is not None and (due is None or deadline < due):
            due = deadline
        if due is not None and (self._wake_at is None or due < self._wake_at):
            self._wake_at = max(due, self.loop.now)
            self.loop.schedule(self._wake_at, Priority.RELEASE, _Wake(self._wake_at))

    # -- arrivals and sessions -----------------------------------------------------------

    def _arrive(self, workload_job: WorkloadJob, now: float) -> None:
        self._arrivals_left -= 1
        job = pin_datasets(workload_job.job)  # as the control plane pins them at submit
        if not self.elastic and job.elastic_role() is not None:
            job = replace(job, roles=tuple(replace(r, elastic=None) for r in job.roles))
        if self.options.oracle_runtime:
            job = replace(job, runtime_estimate=workload_job.duration)
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
        self._emit(now, EventKind.SUBMITTED, job.name)
        self._carry_out(self.life.submit(job, now=now))
        if self.elastic and self.cluster.bootstrap(job.name, now):
            self.life.report(job.name, self.cluster.reported(job.name))
        self._triggered(now)

    def _session(self, now: float) -> None:
        if self.elastic:
            self.cluster.observe(now)
            self._pass_reports()
        started = time.perf_counter()
        decisions = self.state.cycle(self.config, now=now, registry=self.registry)
        self.metrics.session_seconds.append(time.perf_counter() - started)
        self._apply(decisions, now)
        if self._on_session is not None:
            self._on_session(now, decisions)
        self._sample_fragmentation(now)
        self._plan_periodic(
            now,
            decided=bool(
                decisions.binds or decisions.evictions or decisions.admitted or decisions.resized
            ),
        )
        if decisions.resized and self._resized_at != now:
            # A grown job's new replicas wait to be placed: the next session comes as one
            # would after an event (the control plane places them at its next tick, Pollux
            # applies a new allocation at once), not a whole period later. Once an instant.
            self._resized_at = now
            self._triggered(now)

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
        nothing can change: periodic sessions stop. Elastic jobs under an elastic policy
        count as waiting (for their next size).
        """
        if not self._wants_sessions():
            return
        busy = bool(self.state.snapshot.task_count.any()) or len(self.loop) > 0
        if not decided and not busy:
            return
        period, cap = self.options.period, self.options.max_period
        if self.options.fixed_period:
            self._request_session(now + period)
            return
        if decided:
            self._idle_sessions = 0
        elif self._idle_sessions < 60 and period * 2.0**self._idle_sessions < cap:
            self._idle_sessions += 1  # stops doubling at the cap: no overflow however long
        wait = min(period * 2.0**self._idle_sessions, cap)
        self._request_session(now + wait)

    def _apply(self, decisions: Decisions, now: float) -> None:
        for reservation in decisions.reservations:
            self._emit(
                now,
                EventKind.RESERVED,
                reservation.job,
                nodes=list(reservation.nodes),
                start=reservation.start_time,
            )
        self._carry_out(self.life.apply(decisions, now=now))

    # -- effects --------------------------------------------------------------------------

    def _carry_out(self, effects: list[Effect]) -> None:
        """Record the lifecycle's effects in the metrics and events.jsonl; hand starts and
        stops to the simulated cluster."""
        for effect in effects:
            match effect:
                case TaskChanged():
                    self._task_changed(effect)
                case JobChanged():
                    if self.idle is not None:
                        self._idle_phase(effect)
                    if effect.phase in _OUTCOMES:
                        outcome = _OUTCOMES[effect.phase]
                        if effect.reason in _KILLED:
                            outcome = "killed"
                        self.metrics.ended(effect.time, effect.job, outcome)
                        self._resources.pop(effect.job, None)
                        if self._on_job_end is not None:
                            self._on_job_end(effect)
                case JobCounters():
                    record = self.metrics.jobs[effect.job]
                    self.metrics.preemptions += effect.preemptions - record.preemptions
                    record.preemptions, record.restarts = effect.preemptions, effect.attempts
                case Event():
                    self._emit_event(effect)
                    if self._on_preempted is not None and _preemption(effect):
                        self._on_preempted(effect)
                case Start():
                    self.cluster.start(effect.binds, now=self.loop.now)
                case Stop():
                    self.cluster.stop(effect.evictions, now=self.loop.now, grace=self.options.grace)
                case Waiting() | Resized():
                    pass

    def _task_changed(self, change: TaskChanged) -> None:
        held, was = change.phase in HOLDS_RESOURCES, change.previous in HOLDS_RESOURCES
        if change.phase is TaskPhase.RUNNING and change.previous is TaskPhase.BOUND:
            info = self.state.snapshot.jobs.get(change.job)
            if info is not None and info.ready_count >= info.min_available:  # the gang runs
                self.metrics.started(change.time, change.job)
        if held == was:
            return
        job = self.jobs[change.job].job
        resources = self._role_resources(job)[change.role]
        sign = 1.0 if held else -1.0
        self.metrics.allocation(change.time, job.queue, job.user, resources, sign)
        if self.idle is not None and self.idle.idle(self.jobs[change.job]) is not None:
            self.idle.stats.hold(change.time, sign * resources.get("gpu"))

    def _role_resources(self, job: Job) -> dict[str, Resources]:
        """Each role's resources by name, kept while the job lives."""
        found = self._resources.get(job.name)
        if found is None:
            found = self._resources[job.name] = {r.name: r.resources for r in job.roles}
        return found

    def _emit_event(self, event: Event) -> None:
        if self._out is None and self._on_event is None:
            return
        extra: dict[str, object] = {}
        if event.binds:
            extra["tasks"] = [
                self._task_row(self.jobs[event.job], b.task, b.role, b.node, b.gpus)
                for b in event.binds
            ]
        elif event.kind is EventKind.EVICTED:
            extra.update(
                tasks=[e.task for e in event.stops],
                by=event.stops[0].by if event.stops else event.job,
                action=event.stops[0].action if event.stops else "",
            )
        elif event.tasks:
            extra["tasks"] = list(event.tasks)
        if event.kind in (EventKind.TASK_FAILED, EventKind.FAILED, EventKind.IDLE):
            extra["message"] = event.message
        self._emit(event.time, event.kind, event.job, **extra)

    # -- idle GPUs ---------------------------------------------------------------------------

    def _idle_phase(self, change: JobChanged) -> None:
        """Read a job while its gang runs (when its queue judges it idle), not otherwise."""
        assert self.idle is not None
        if change.phase is JobPhase.RUNNING:
            if self.idle.running(self.jobs[change.job]):
                self._plan_idle_read(change.time)
        elif change.phase in _OUTCOMES:
            self.idle.ended(change.job)
        else:
            self.idle.paused(change.job)

    def _plan_idle_read(self, now: float) -> None:
        assert self.idle is not None
        due = self.idle.next_read(now)
        if due is not None and (self._read_at is None or due < self._read_at):
            self._read_at = due
            self.loop.schedule(due, Priority.ARRIVAL, _IdleRead(due))

    def _read_idle(self, now: float) -> None:
        """Read the running idle jobs; apply the verdicts through the lifecycle's rule
        (``act_on``) and count what came of them."""
        assert self.idle is not None
        verdicts = self.idle.read(now)
        before = {
            v.job: (self._gpus_running(v.job), self.cluster.remaining(v.job, now)) for v in verdicts
        }
        self._carry_out(act_on(self.life, self.idle.watch, verdicts, now=now))
        for verdict in verdicts:
            life = self.life.jobs.get(verdict.job)
            gpus, remaining = before[verdict.job]
            stopped = life is None or life.ending is Ending.IDLE
            freed = gpus - self._gpus_running(verdict.job)
            self.idle.judged(verdict, stopped=stopped, freed=freed, remaining=remaining)
        self._plan_idle_read(now)

    def _gpus_running(self, name: str) -> float:
        """GPUs of job ``name``'s tasks that hold a node and are not being stopped."""
        life = self.life.jobs.get(name)
        if life is None:
            return 0.0
        per_role = self._role_resources(self.jobs[name].job)
        alive = (TaskStatus.BOUND, TaskStatus.RUNNING)
        return sum(
            per_role[t.role.name].get("gpu") for t in self.life.tasks(life) if t.status in alive
        )

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
        if not event.up:
            self.cluster.lose_node(event.node, now=now)
        if not event.planned and event.up:
            self._schedule_failure(event.node, now)
        elif not event.planned:
            self.loop.schedule(
                now + float(self._rng.exponential(self.options.node_mttr)),
                Priority.RELEASE,
                _NodeChange(event.node, up=True),
            )
        kind = EventKind.NODE_UP if event.up else EventKind.NODE_DOWN
        self._emit(now, kind, "", node=event.node)
        self._triggered(now)

    # -- output -------------------------------------------------------------------------------

    def _task_row(
        self, job: WorkloadJob, task: str, role: str, node: str, gpus: tuple[int, ...]
    ) -> dict[str, object]:
        spec = next(r for r in job.job.roles if r.name == role)
        resources = {name: _number(v) for name, v in spec.resources.items() if v}
        return {"task": task, "node": node, "gpus": list(gpus), "resources": resources}

    def _emit(self, now: float, ev: EventKind, job: str, **extra: object) -> None:
        if self._out is None and self._on_event is None:
            return
        record = self.metrics.jobs.get(job)
        row: dict[str, object] = {
            "t": float(round(now, 6)),
            "ev": ev.value,
            "job": job,
            "queue": record.queue if record else "",
            "user": record.user if record else "",
        }
        row.update(extra)
        if self._out is not None:
            self._out.write(json.dumps(row, separators=(",", ":")) + "\n")
        if self._on_event is not None:
            self._on_event(row)


#: The outcome a job's metrics record for each terminal phase (Failed past its walltime,
#: or stopped for idle GPUs, is ``killed``: a reason code of ``_KILLED``).
_KILLED = frozenset({"WalltimeExceeded", "IdleGpus"})
_OUTCOMES = {
    JobPhase.SUCCEEDED: "finished",
    JobPhase.FAILED: "failed",
    JobPhase.CANCELLED: "cancelled",
}


def _data_plane(nodes: Sequence[Node], workload: Workload, model: CacheModel) -> DataPlane | None:
    """The nodes' dataset caches when the workload's jobs read datasets, else None."""
    read = names_read(item.job for item in workload.jobs)
    if not read:
        return None
    sizes = {dataset.name: dataset.size for dataset in workload.datasets}
    unsized = sorted(read - set(sizes))
    if unsized:
        raise InvalidInput(
            f"datasets {', '.join(unsized[:5])} have no size",
            field="datasets",
            fix="give their sizes in the workload (or with --dataset-size)",
        )
    return DataPlane([node.name for node in nodes], sizes, model)


def _preemption(event: Event) -> bool:
    """Whether ``event`` is the eviction of a session's preemption or reclaim."""
    return event.kind is EventKind.EVICTED and any(
        stop.action in ("preempt", "reclaim") for stop in event.stops
    )


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
