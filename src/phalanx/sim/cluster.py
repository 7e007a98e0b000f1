"""SimCluster: an Executor whose tasks run on a virtual clock.

A job makes progress while at least ``min_available`` of its tasks run. When it drops
below that (an eviction, a lost node), its run stops and the progress since its last
checkpoint is lost; it resumes from that checkpoint when placed again. A job whose run
reaches its duration ends: every task exits with code 0. A run the workload marks as
failing (``WorkloadJob.fail_after``) ends first with its first task exiting with code
1; its other tasks run on until the scheduler stops them. Walltime is not the
cluster's business: the lifecycle stops a job past it, as in production.

Colocation (with an SLA ``watermark``): an offline job shares its nodes' GPUs with the
online services there. While the busiest service on one of its nodes is above the
watermark, the job is held (no progress, its processes stay); otherwise it progresses
at the share that service leaves (1 - load). Services' loads follow their ``load`` steps.
Progress is work done at these rates; checkpoints count work, walltime counts seconds.
A job with a ``restart_delay`` makes no progress in the first that many seconds of each
run (its first and every resume), though its tasks run and hold their GPUs.

Elastic training jobs (``WorkloadJob.elastic``, when the cluster is made with
``elastic=True``) progress by Pollux's model instead (``sim.elastic.ElasticRun``): on
whatever replicas run (one GPU each, counted per node), from one replica up, at a rate
that changes with the placement, the batch and the epoch; every change of placement
costs ``restart_delay`` seconds; nothing is lost when they stop. The job ends when its
training is done: every running task exits with code 0. ``reports()`` hands over what
such jobs say of their training (``Progress``), for the driver to pass on.

GPU types (``gpu_models``: each node's GPU model): a job whose model has curves per GPU
type trains by those of the type it runs on, elastic or fixed-size, as
``phalanx.sim.gpu_types`` says (a fixed-size job's work accrues at its speed there
relative to its duration's reference); ``gpu_types`` counts what happened. A job
without such curves progresses exactly as described above.

Datasets (with a ``DataPlane``): a task reading datasets its node does not hold whole
starts, holds its resources and waits for them (``phalanx.sim.data``); a job's run makes
progress (and its restart delay begins) once every task of its gang has its data; an
elastic job's change of placement costs its delay from when its new replicas have theirs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from phalanx.domain.job import ServiceClass
from phalanx.domain.progress import Progress
from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.goodput import PerfParams
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.sim.data import DataPlane, dataset_key
from phalanx.sim.elastic.job import profile_fit
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.tracker import ElasticRun
from phalanx.sim.gpu_types import Choice, GpuTypeStats, bootstrap_rows, choose, fixed_speed
from phalanx.sim.workload import WorkloadJob

FAILED_CODE = 1  # the exit code of a task whose run the workload marks as failing


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
    failures: int = 0  # runs that failed so far (``fail_after`` says how many will)
    rate: float = 1.0  # work per second now (below 1 while colocated services are busy)
    speed: float = 1.0  # times its duration's pace on the GPU type and placement it has
    progress: float = 0.0  # work done in the current run up to ``since``
    since: float = 0.0  # when ``rate`` last changed in the current run, or its delay ends
    elastic: ElasticRun | None = None  # an elastic training job's model (then the above rest)
    ready: dict[str, float] = field(default_factory=dict)  # task -> when its data is there

    def work(self, now: float) -> float:
        """Work done in the current run by ``now``."""
        return self.progress + self.rate * self.speed * max(now - self.since, 0.0)

    def kept(self, work: float) -> float:
        """Work kept after ``work`` of the current run: up to the last checkpoint."""
        interval = self.spec.checkpoint_interval
        if interval is None or interval <= 0:
            return self.done
        return self.done + (work // interval) * interval


class SimCluster:
    """Runs simulated tasks; implements ``phalanx.executors.base.Executor``."""

    def __init__(
        self,
        jobs: Mapping[str, WorkloadJob],
        *,
        watermark: float | None = None,
        elastic: bool = False,
        data: DataPlane | None = None,
        gpu_models: Mapping[str, str] | None = None,
    ) -> None:
        """``elastic``: jobs with an elastic model progress by it (else by duration);
        ``data``: the nodes' dataset caches, when jobs read datasets; ``gpu_models``:
        each node's GPU model (a node not named: "")."""
        self._jobs = jobs
        self._models = dict(gpu_models or {})
        #: what GPU types did to jobs with curves per type (empty without any)
        self.gpu_types = GpuTypeStats()
        self._data = data
        self._elastic = elastic
        self._reports: dict[str, Progress] = {}
        self._told: dict[str, int] = {}  # steps in the log when each job last reported
        self._training: dict[str, ElasticRun] = {}  # elastic jobs not yet complete
        #: per (application, GPU model): its whole profile's fit
        self._fits: dict[tuple[str, str], PerfParams] = {}
        self._runs: dict[str, _Run] = {}
        self._events: list[tuple[float, int, TaskEvent]] = []
        self._ends: list[tuple[float, int, str, int]] = []  # (time, seq, job, attempt)
        self._seq = 0
        self._watermark = watermark
        #: when some online service's load changes (only kept with a watermark)
        self._load_steps: list[float] = (
            sorted({at for spec in jobs.values() for at, _ in spec.load})
            if watermark is not None
            else []
        )

    # -- Executor ---------------------------------------------------------------------

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        for bind in binds:
            run = self._run(bind.job)
            run.running[bind.task] = bind.node
            if self._data is not None:
                run.ready[bind.task] = self._data.start(
                    (bind.job, bind.task), bind.node, self._reads(run, bind.role), now
                )
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
        self._share_gpus(now)

    def observe(self, now: float) -> None:
        """Bring every training elastic job up to ``now`` and have each whose log grew
        since it last reported report again, as a real job writes its progress file as it
        trains (Pollux's agents report every interval): a scheduler then knows a new
        configuration's step time once the job has trained on it, not only at the end of
        an epoch. Training is a pure function of time, so when this is called changes no
        result but what the scheduler is told."""
        for name in sorted(self._training):
            tracker = self._training[name]
            if tracker.completed_at is not None:
                del self._training[name]
                continue
            if not tracker.placement:
                continue
            tracker.advance(now)
            if len(tracker.job.log.rows) != self._told.get(name):
                self._report(name, tracker, now)

    def bootstrap(self, job: str, now: float) -> bool:
        """``job`` arrived: on a cluster of several GPU types, an elastic job with curves
        for two or more of them reports its bootstrapping points (``bootstrap_rows``)
        before it runs, as Sia's scheduler is given them; whether it did (``reported``
        then says what)."""
        spec = self._jobs[job]
        if not self._elastic or spec.elastic is None or not spec.elastic.by_model:
            return False
        rows = bootstrap_rows(spec.elastic, set(self._models.values()))
        tracker = self._run(job).elastic
        if not rows or tracker is None:
            return False
        tracker.seed(rows)
        self._report(job, tracker, now)
        return True

    def reported(self, job: str) -> Progress:
        """``job``'s report not yet handed on (taken: ``reports`` will not give it)."""
        return self._reports.pop(job)

    def _report(self, name: str, tracker: ElasticRun, now: float) -> None:
        self._reports[name] = tracker.report(now)
        self._told[name] = len(tracker.job.log.rows)

    def reports(self) -> list[tuple[str, Progress]]:
        """What elastic jobs reported since the last call, by job name (each job's latest)."""
        found = sorted(self._reports.items())
        self._reports.clear()
        return found

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
        self._share_gpus(now)

    def poll(self, *, now: float) -> list[TaskEvent]:
        if self._data is not None:
            self._data.land(now)
        while self._load_steps and self._load_steps[0] <= now:
            step = heapq.heappop(self._load_steps)
            self._finish_due(step)
            self._share_gpus(step)
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
        times += self._load_steps[:1]
        landing = None if self._data is None else self._data.next_landing()
        times += [] if landing is None else [landing]
        return min(times) if times else None

    def remaining(self, job: str, now: float) -> float:
        """Seconds ``job`` would still run from ``now`` at its present rate: its duration
        less the work kept and done (an elastic job: its duration times the share of its
        training left); 0 for a job not making progress now."""
        run = self._runs.get(job)
        if run is None or run.started is None:
            return 0.0
        if run.elastic is not None:
            run.elastic.advance(now)
            total = float(run.elastic.profile.progress[-1])
            done = run.elastic.job.position.progress / total if total > 0 else 1.0
            return max(1.0 - done, 0.0) * run.spec.duration
        left = max(run.spec.duration - run.done - run.work(now), 0.0)
        pace = run.rate * run.speed
        return left / pace if pace > 0 else left  # held: as if it ran at full speed

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
        self._share_gpus(now)

    # -- internals ------------------------------------------------------------------------

    def _run(self, job: str) -> _Run:
        run = self._runs.get(job)
        if run is None:
            spec = self._jobs[job]
            gang = spec.job.gang_size
            if not self._elastic and spec.job.min_available is None:
                gang = sum(role.replicas for role in spec.job.roles)  # runs at its asked size
            run = self._runs[job] = _Run(spec=spec, gang=gang)
            model = spec.elastic
            if model is not None and self._elastic:
                run.elastic = self._training[job] = ElasticRun(
                    profile=model.profile,
                    batch_size=None if model.adaptive else model.batch_size,
                    delay=spec.restart_delay,
                    known=self._known(model.profile, adaptive=model.adaptive),
                )
        return run

    def _known(self, profile: AppProfile, *, adaptive: bool) -> PerfParams | None:
        """The fit of ``profile``'s whole curves (made for adaptive jobs, then shared)."""
        key = (profile.name, profile.gpu_model)
        known = self._fits.get(key)
        if known is None and adaptive:
            known = self._fits[key] = profile_fit(profile)
        return known

    def _choice(self, run: _Run) -> Choice | None:
        """The curves ``run``'s job trains by where its replicas are (None: its model has
        no curves per type, or nothing runs), recorded in ``gpu_types``."""
        model = run.spec.elastic
        placement = self._placement(run)
        if model is None or not model.by_model or not placement:
            return None
        nodes = self._nodes(run)
        choice = choose(model, [self._models.get(node, "") for node in nodes], placement)
        self.gpu_types.record(run.spec.name, choice)
        return choice

    def _placement(self, run: _Run) -> list[int]:
        """GPUs per node of ``run``'s replicas that run and are not stopping (one each)."""
        per_node = self._nodes(run)
        return [per_node[node] for node in sorted(per_node)]

    def _nodes(self, run: _Run) -> dict[str, int]:
        """Per node, ``run``'s replicas there that run and are not stopping."""
        per_node: dict[str, int] = {}
        for task, node in sorted(run.running.items()):
            if task not in run.stopping:
                per_node[node] = per_node.get(node, 0) + 1
        return per_node

    def _moved(self, run: _Run, now: float) -> None:
        """An elastic job's replicas changed: restart it on them, plan its next change."""
        tracker = run.elastic
        assert tracker is not None
        choice = self._choice(run)
        profile = None if choice is None else choice.profile
        known = None
        if profile is not None and profile is not tracker.profile:
            known = self._known(profile, adaptive=tracker.batch_size is None)
        placement = self._placement(run) if choice is None else list(choice.placement)
        moved = tracker.move(placement, now, profile=profile, known=known)
        if tracker.completed_at is not None:  # it completed before this change
            self._elastic_due(run, now)
            return
        if not moved:
            return
        tracker.wait_for(self._ready(run, now))
        run.started = now if tracker.placement else None
        self._plan_elastic(run, now)
        self._report(run.spec.name, tracker, now)

    def _plan_elastic(self, run: _Run, now: float) -> None:
        """Plan the next check of an elastic job (an earlier plan no longer applies)."""
        tracker = run.elastic
        assert tracker is not None
        run.attempt += 1
        due = tracker.next_change()
        if due is not None:
            self._seq += 1
            heapq.heappush(self._ends, (max(due, now), self._seq, run.spec.name, run.attempt))

    def _elastic_due(self, run: _Run, end: float) -> None:
        """An elastic job's epoch ended (or it completed) at ``end``."""
        tracker = run.elastic
        assert tracker is not None
        tracker.advance(end)
        self._report(run.spec.name, tracker, end)
        done = tracker.completed_at
        if done is None:
            self._plan_elastic(run, end)
            return
        run.attempt += 1  # no check of it is due any more
        for task, node in sorted(t for t in run.running.items() if t[0] not in run.stopping):
            run.stopping.add(task)
            self._emit(
                done,
                TaskEvent(
                    kind=TaskEventKind.EXITED,
                    time=done,
                    job=run.spec.name,
                    task=task,
                    node=node,
                    exit_code=0,
                ),
            )
        run.started = None

    def _reads(self, run: _Run, role: str) -> list[tuple[str, str]]:
        """(name, key) of each dataset a task of ``role`` reads."""
        spec = next(r for r in run.spec.job.roles if r.name == role)
        return [(name, dataset_key(name, digest)) for name, digest in spec.datasets]

    def _ready(self, run: _Run, now: float) -> float:
        """When every running task of ``run`` has its data (``now`` at the earliest)."""
        return max([now, *(at for task, at in run.ready.items() if task not in run.stopping)])

    def _active(self, run: _Run) -> int:
        return len(run.running) - len(run.stopping)

    def _maybe_begin(self, run: _Run, now: float) -> None:
        if run.elastic is not None:
            self._moved(run, now)
            return
        if run.started is not None or self._active(run) < run.gang:
            return
        run.started = now
        run.progress, run.since = 0.0, self._ready(run, now) + run.spec.restart_delay
        choice = self._choice(run)
        model = run.spec.elastic
        run.speed = 1.0
        if choice is not None and model is not None:
            run.speed = fixed_speed(model, choice.profile, choice.placement, run.spec.duration)
        self._schedule_end(run, now)

    def _schedule_end(self, run: _Run, now: float) -> None:
        """(Re)plan the current run's end from its rate; an earlier plan no longer applies."""
        assert run.started is not None
        run.attempt += 1
        remaining = max(run.spec.duration - run.done - run.work(now), 0.0)
        pace = run.rate * run.speed
        end = max(now, run.since) + remaining / pace if pace > 0 else math.inf
        if run.failures < len(run.spec.fail_after):
            end = min(end, run.started + run.spec.fail_after[run.failures])
        if math.isfinite(end):
            self._seq += 1
            heapq.heappush(self._ends, (end, self._seq, run.spec.name, run.attempt))

    def _maybe_pause(self, run: _Run, now: float) -> None:
        if run.elastic is not None:
            self._moved(run, now)
            return
        if run.started is None or self._active(run) >= run.gang:
            return
        run.done = run.kept(run.work(now))
        run.started = None
        run.attempt += 1  # the scheduled end no longer applies

    def _share_gpus(self, now: float) -> None:
        """Set every running offline job's rate from the services on its nodes at ``now``."""
        if self._watermark is None:
            return
        busiest: dict[str, float] = {}
        offline: list[_Run] = []
        for run in self._runs.values():
            if run.started is None or run.elastic is not None:
                continue
            kind = run.spec.job.service_class
            if kind is ServiceClass.ONLINE:
                load = run.spec.load_at(now)
                for node in run.running.values():
                    busiest[node] = max(busiest.get(node, 0.0), load)
            elif kind is ServiceClass.OFFLINE:
                offline.append(run)
        for run in sorted(offline, key=lambda r: r.spec.name):
            loads = [busiest.get(node, 0.0) for node in run.running.values()]
            load = max(loads, default=0.0)
            rate = 0.0 if load > self._watermark else 1.0 - load
            if rate != run.rate:
                run.progress, run.since = run.work(now), max(now, run.since)
                run.rate = rate
                self._schedule_end(run, now)

    def _finish_due(self, now: float) -> None:
        while self._ends and self._ends[0][0] <= now:
            end, _, job, attempt = heapq.heappop(self._ends)
            run = self._runs.get(job)
            if run is None or run.attempt != attempt or run.started is None:
                continue
            if run.elastic is not None:
                self._elastic_due(run, end)
                continue
            work = run.work(end)
            completed = work >= run.spec.duration - run.done - 1e-9
            ending = sorted(t for t in run.running.items() if t[0] not in run.stopping)
            if not completed:  # a failing run: its first task fails, the rest run on
                run.failures += 1
                ending = ending[:1]
            for task, node in ending:
                run.stopping.add(task)
                self._emit(
                    end,
                    TaskEvent(
                        kind=TaskEventKind.EXITED,
                        time=end,
                        job=job,
                        task=task,
                        node=node,
                        exit_code=0 if completed else FAILED_CODE,
                    ),
                )
            run.done = run.spec.duration if completed else run.kept(work)
            run.started = None
            if run.spec.job.service_class is ServiceClass.ONLINE:
                self._share_gpus(end)  # its nodes' offline work gets the GPUs back

    def _current(self, end: tuple[float, int, str, int]) -> bool:
        run = self._runs.get(end[2])
        return run is not None and run.attempt == end[3] and run.started is not None

    def _forget(self, job: str, task: str) -> None:
        run = self._runs.get(job)
        if run is None:
            return
        run.running.pop(task, None)
        run.stopping.discard(task)
        run.ready.pop(task, None)
        if self._data is not None:
            self._data.stop((job, task))

    def _emit(self, time: float, event: TaskEvent) -> None:
        self._seq += 1
        heapq.heappush(self._events, (time, self._seq, event))
