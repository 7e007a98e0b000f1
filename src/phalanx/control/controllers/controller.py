"""The controller: the single writer of job and task phases.

Each tick it reads what the API recorded (new jobs, cancel requests, queue and node
changes), applies the executor's reports, enforces walltimes and retry backoffs, runs
one engine session on its incrementally maintained snapshot, commits everything the
tick changed in one transaction, and only then asks the executor to start and stop
processes. A tick runs when woken (``wake``: the API calls it after recording intent)
and at least every ``Timing.period`` seconds while anything is live.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from phalanx.control.controllers import adoption
from phalanx.control.controllers.colocate import Colocation
from phalanx.control.controllers.core import Core, Timing
from phalanx.control.controllers.data_inputs import DatasetInputs
from phalanx.control.controllers.intents import Intent, Intents
from phalanx.control.controllers.launches import SecretValues, launch_of, secret_parts
from phalanx.control.controllers.nodes import Cluster
from phalanx.control.controllers.priorities import JobPriority, Priorities
from phalanx.control.controllers.progress import ProgressReader
from phalanx.control.controllers.rebuild import bank_ledger, life_of, new_state, stored_tasks
from phalanx.control.controllers.telemetry import GpuTelemetry
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.controllers.views import ClusterView, HostFacts, cluster_view, places
from phalanx.control.metrics import Metrics
from phalanx.control.store import Session
from phalanx.control.store import cards as stored_cards
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.database import Database
from phalanx.control.store.models import JobRow
from phalanx.data.copies import DatasetCopy
from phalanx.domain.job import Job, JobPhase
from phalanx.domain.node import Node
from phalanx.engine.decisions import Bind, Decisions
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.lifecycle import (
    Lifecycle,
    RetryPolicy,
    TaskEvent,
    TaskEventKind,
    parts_by_job,
)
from phalanx.engine.plugins.fairshare import half_life_of
from phalanx.engine.snapshot import ON_NODE
from phalanx.engine.state import ClusterState
from phalanx.executors.base import (
    Executor,
    LogSource,
    LogStream,
    Recoverable,
    TaskLog,
)
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import GangMember, TaskLaunch
from phalanx.executors.records import ProcessRecord
from phalanx.models.cache import ModelCache

log = logging.getLogger(__name__)


#: API requests per second above which the controller yields more of the interpreter.
SATURATED = 200.0


ExecutorFactory = Callable[[Callable[[Bind], TaskLaunch]], Executor]
#: The Unix identity a user's tasks run as (raises ``InvalidInput`` for a user without).
IdentityOf = Callable[[str], TaskIdentity]
_Arg = TypeVar("_Arg")


@dataclass(slots=True)
class SessionStats:
    """The last session's Decisions and how many sessions ran."""

    last: Decisions = field(default_factory=Decisions)
    count: int = 0


class Controller:
    """Runs ticks on a thread of its own; ``wake`` asks for one soon."""

    def __init__(
        self,
        db: Database,
        nodes: Sequence[Node],
        config: SchedulerConfig,
        executor: ExecutorFactory,
        *,
        timing: Timing | None = None,
        clock: Callable[[], float] = time.time,
        metrics: Metrics | None = None,
        identity_of: IdentityOf | None = None,
        host: HostFacts | None = None,
        model_cache: ModelCache | None = None,
        datasets: DatasetInputs | None = None,
        secrets: SecretValues | None = None,
    ) -> None:
        self.db = db
        self._model_cache = model_cache
        self._datasets = datasets
        self._host_held: frozenset[str] = frozenset()  # what the host's cache held last tick
        self._secrets = secrets
        self.host = host or HostFacts()
        self._identity_of = identity_of
        self.metrics = metrics
        self.cluster = Cluster(nodes)
        self.config = config
        self._priorities = Priorities(config)  # the fairshare plugin, for the view's factors
        self.clock = clock
        self.stats = SessionStats()
        self.lock = threading.Lock()  # held during a tick; readers of ``core`` take it too
        self._ticker = Ticker("phalanx-controller", self._round, pace=self._pace)
        self._began = self._busy = 0.0  # the last tick's start (monotonic) and CPU seconds
        self._recorded: set[tuple[str, str]] = set()
        timing = timing or Timing()
        self._policy = RetryPolicy(backoff=timing.backoff, max_backoff=timing.max_backoff)
        self.core = Core(self._lifecycle(self._empty_state()), executor(self._launch), timing)
        self._progress = ProgressReader(self.core)
        #: Offline tasks pause while online ones are busier than the watermark, ticked
        #: here (the server sets it on the local executor; each Ray node's agent runs its
        #: own); None: never.
        self.colocation: Colocation | None = None
        #: GPU readings in, broken cards out, idle jobs acted on (``GpuSource`` executors)
        self.telemetry = GpuTelemetry()
        self.intents = Intents(self.core)
        self._next_deadline: float | None = None
        self._failed_starts: list[TaskEvent] = []  # heard at the next tick
        self._broken = False  # a tick failed and memory is not rebuilt yet
        self._ended_seen = 0
        self.view = ClusterView()  # replaced whole after every tick: readers need no lock
        #: called (on the controller's thread) after a tick that ended jobs was committed
        self.on_jobs_ended: list[Callable[[], None]] = []

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        """Recover from the store, then tick on a daemon thread until ``shutdown``."""
        self.recover()
        self._ticker.start()

    def poke(self) -> None:
        """Ask for a tick as soon as possible (thread-safe) with nothing changed in the
        store: the executor has news (a task ended)."""
        self._ticker.poke()

    def wake(self, *changed: Intent) -> None:
        """Ask for a tick as soon as possible (thread-safe), naming what the caller changed
        in the store; the tick reads just that. Everything is read again every period
        anyway, so a writer outside this process is seen too."""
        self.intents.wake(changed)
        self._ticker.poke()

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Stop ticking once the tick under way is done (running tasks are left alone: a
        restart re-adopts them). False when the tick was still running after ``timeout``."""
        return self._ticker.stop(timeout)

    def _round(self) -> float:
        """One tick (or, after a failed one, a rebuild from the store); how long the next
        may wait: a period, or less when a deadline (a backoff, a walltime) falls sooner."""
        self._began, cpu = time.monotonic(), time.thread_time()
        if self._broken:  # memory was dropped and not rebuilt yet: no tick without it
            self._recover_after_failure()
        else:
            try:
                self.tick()
            except Exception:  # a bug in one tick must not stop the service
                log.exception("controller tick failed; rebuilding from the store")
                self._broken = True
                self._recover_after_failure()
        # CPU time, not wall time: a tick that waits (for the launcher, the database)
        # leaves the interpreter to the API meanwhile.
        self._busy = time.thread_time() - cpu
        wait = self.core.timing.period
        if self._next_deadline is not None:
            wait = max(0.0, min(wait, self._next_deadline - self.clock()))
        return wait

    def _pace(self) -> float:
        """How much longer to rest after a tick's wait: a burst of wake-ups makes one
        tick, and a costly tick spaces ticks out. The controller takes at most half of
        the interpreter, and a quarter while the API is flooded (over SATURATED requests
        a second), so the API keeps up."""
        rate = self.intents.take_wakes() / max(time.monotonic() - self._began, 1e-3)
        share = 0.25 if rate > SATURATED else 0.5
        gap = max(self.core.timing.coalesce, self._busy / share)
        return gap - (time.monotonic() - self._began)

    # -- recovery ------------------------------------------------------------------------

    def _recover_after_failure(self) -> None:
        """The tick's memory may disagree with the store: drop it and read the store again.
        Tasks the executor still runs are adopted again; ended ones report from disk."""
        try:
            with self.lock:
                self.recover()
            self._broken = False
        except Exception:
            log.exception("rebuilding from the store failed; retrying after a period")

    def recover(self) -> None:
        """Rebuild memory from the store and re-adopt the executor's surviving tasks.

        A job whose stored state cannot be taken back (a bug, or a task on a node the
        cluster no longer has) is marked Failed with the reason; the others go on.
        """
        core, cluster = self.core, self.cluster
        cluster.forget()
        cluster.follow(core, db=None)
        core.reset(self._lifecycle(self._empty_state()))
        self._recorded.clear()
        core.now = self.clock()
        with self.db.session() as session:
            banked = bank_ledger(session, core.state, core.now)
            log.info("usage: %d ended runs of the ledger banked for fair-share", banked)
            cluster.read_flags(session, core)
            self._read_cards(session)
            cluster.read_queues(session, core, force=True)
            rows = stored_jobs.active_with_tasks(session)
            records = []
            for row in rows:
                try:
                    life, rows_of = life_of(row)
                    current = replace(life.job, phase=life.phase, tasks=stored_tasks(row))
                    core.rows[life.name] = rows_of
                    core.record(core.life.restore(life, current, now=core.now))
                except Exception as error:  # one unreadable job must not stop the server
                    log.exception("cannot take back job %s; marking it failed", row.name)
                    self._unrecoverable(row, error)
                    continue
                for task in row.tasks:
                    if task.process:
                        records.append(ProcessRecord.from_dict(task.process))
                        self._recorded.add((row.name, task.name))
            executor = core.executor
            if isinstance(executor, Recoverable):
                executor.adopt(records, now=core.now)
            reconciled = adoption.reconcile(core, self._recorded)
            for job, tasks in reconciled.unstarted.items():
                self._guarded(job, self._restart_unstarted, (job, tasks))
            for job, events in reconciled.events.items():
                self._guarded(job, self._hear, events)
            cluster.drain(core)  # again: the flags were read before the jobs were back
            core.journal.flush(session)
        self._dispatch()
        self.view = cluster_view(core, self.host, cluster.alive, priorities=self._ranked())

    def _unrecoverable(self, row: JobRow, error: Exception) -> None:
        """Mark a stored job Failed when it cannot be taken back at start-up, asking the
        executor to stop whatever of it the engine had taken in."""
        core = self.core
        message = f"the server could not take this job back at start-up: {error!r}"[:2000]
        if row.name in core.life.jobs and row.name in core.rows:
            try:
                core.record(core.life.drop(row.name, message))
                return
            except Exception:
                log.exception("dropping job %s failed too; failing its row alone", row.name)
        core.life.jobs.pop(row.name, None)
        core.rows.pop(row.name, None)
        core.journal.job(
            row.id,
            phase=JobPhase.FAILED.value,
            reason="Aborted",
            message=message,
            phase_time=core.now,
            finished_at=core.now,
        )
        core.journal.event(row.id, core.now, JobPhase.FAILED.value, message)

    # -- one tick ------------------------------------------------------------------------

    def tick(self) -> Decisions | None:
        """Read intent, apply events, run a session if work waits, commit, then dispatch.

        An error met while handling one job's events or decisions fails that job (reason
        ``Aborted``) and the tick goes on with the others."""
        with self.lock:
            core = self.core
            core.now = self.clock()
            core.decided = False
            changed, full = self.intents.take(core.now, core.timing.period)
            if full:
                self._progress.read(self._guarded)
            self._follow_nodes()
            if changed:
                with self.db.session() as session:
                    if Intent.NODES in changed:
                        self.cluster.read_flags(session, core)
                        self._read_cards(session)
                    if Intent.QUEUES in changed:
                        self.cluster.read_queues(session, core)
                    self.intents.read(session, changed, self._guarded)
            events: dict[str, list[TaskEvent]] = {}
            reported, self._failed_starts = self._failed_starts, []
            for event in [*reported, *core.executor.poll(now=core.now)]:
                events.setdefault(event.job, []).append(event)
            for job, mine in events.items():
                self._guarded(job, self._hear, mine)
            if self.colocation is not None:
                self.colocation.tick(core)
            if self.telemetry.tick(core, self.db):  # a card broke: out of scheduling now
                with self.db.session() as session:
                    self._read_cards(session)
            for job in core.life.due(core.now):
                self._guarded(job, self._advance, job)
            self._next_deadline = core.life.next_deadline()
            decisions = None
            if core.state.snapshot.waiting or core.state.snapshot.elastic:
                started = time.perf_counter()
                decisions = core.state.cycle(self.config, now=core.now)
                self._observe(decisions, time.perf_counter() - started)
                self._apply(decisions)
            ended = core.ended
            if core.journal:
                with self.db.write() as session:
                    core.journal.flush(session)
            if ended != self._ended_seen:
                self._ended_seen = ended
                for listener in self.on_jobs_ended:
                    listener()
            self._dispatch()
            self._record_processes()
            self.view = view = cluster_view(
                core, self.host, self.cluster.alive, places(decisions), self._ranked()
            )
            if self.metrics is not None:
                ratio = view.gpu_allocated / view.gpu_total if view.gpu_total else 0.0
                self.metrics.history.gauges(
                    now=core.now, pending=len(core.state.snapshot.waiting), gpu_ratio=ratio
                )
            return decisions

    def _follow_nodes(self) -> None:
        """Take in the executor's node changes and what the host's dataset cache holds."""
        core = self.core
        self.cluster.follow(core, self.db)
        inputs = self._datasets
        if inputs is not None and inputs.cache is not None:  # every node is this host
            held = inputs.cache.held()
            if held != self._host_held:  # a fill or an eviction: rare
                self._host_held = held
                self.cluster.hold(core, {node.name: held for node in self.cluster.nodes})

    def _read_cards(self, session: Session) -> None:
        """Take the store's cordoned cards into the engine's nodes and the telemetry."""
        self.cluster.read_cards(session, self.core)
        self.telemetry.read_cordons(stored_cards.cordons(session))

    def _ranked(self) -> dict[str, JobPriority] | None:
        """Each waiting job's multifactor priority now (None: no fairshare plugin).
        Called under ``lock``, at the end of a tick or a recovery."""
        if not self._priorities.enabled:
            return None
        return self._priorities.of(self.core.state.snapshot, self.core.now)

    def _advance(self, job: str) -> None:
        self.core.record(self.core.life.advance_job(job, now=self.core.now))

    def _restart_unstarted(self, unstarted: tuple[str, list[str]]) -> None:
        job, tasks = unstarted
        core = self.core
        core.record(core.life.unstarted(job, tasks, adoption.CUT_SHORT, now=core.now))

    def _hear(self, events: Sequence[TaskEvent]) -> None:
        for event in events:
            self.core.record(self.core.life.on_event(event, now=self.core.now))

    def _apply(self, decisions: Decisions) -> None:
        """Hand a session's Decisions to the lifecycle a job's part at a time, in the
        lifecycle's own order (``parts_by_job``), so that one job's error fails it alone."""
        for job, part in parts_by_job(decisions):
            self._guarded(job, self._decided, part)

    def _decided(self, part: Decisions) -> None:
        self.core.record(self.core.life.apply(part, now=self.core.now))

    def _guarded(self, job: str, handle: Callable[[_Arg], None], arg: _Arg) -> None:
        """Run ``handle(arg)`` for ``job``; if it raises, fail that job alone, with the error."""
        core = self.core
        try:
            handle(arg)
        except Exception as error:
            log.exception("handling job %s failed; failing the job", job)
            message = f"the controller met an error handling this job: {error!r}"[:2000]
            try:
                core.record(core.life.abort(job, message, now=core.now))
            except Exception:
                log.exception("failing job %s failed too; dropping it", job)
                core.record(core.life.drop(job, message))

    def _dispatch(self) -> None:
        """Send the executor its requests; the tasks of a start that raised failed to start
        (the executor's protocol says ``start`` reports such failures as events, so this
        guards against an executor's bug, not an expected outcome)."""
        for binds, error in self.core.dispatch():
            self._failed_starts.extend(
                TaskEvent(
                    kind=TaskEventKind.FAILED_TO_START,
                    time=self.core.now,
                    job=bind.job,
                    task=bind.task,
                    node=bind.node,
                    message=f"the executor refused it: {error}",
                )
                for bind in binds
            )
            self._ticker.poke()

    def _observe(self, decisions: Decisions, seconds: float) -> None:
        self.stats.last = decisions
        self.stats.count += 1
        if self.metrics is not None:
            self.metrics.session_seconds.observe(seconds)
            for eviction in decisions.evictions:
                self.metrics.evictions.labels(eviction.action).inc()
            self.metrics.history.session(
                now=self.core.now,
                seconds=seconds,
                started=len({bind.job for bind in decisions.binds}),
                evicted=len(decisions.evictions),
            )

    def offer(self, stored: Sequence[tuple[int, Job]]) -> None:
        """Jobs this process just committed, by row id (thread-safe): the next tick takes
        them as they are (``Intents.offer``)."""
        self.intents.offer(stored)

    def _lifecycle(self, state: ClusterState) -> Lifecycle:
        return Lifecycle(state, self._policy)

    def _empty_state(self) -> ClusterState:
        """The engine state before queues and jobs are read in, its users' usage decaying
        at the half-life the scheduler's fairshare plugin asks for."""
        return new_state(self.cluster.nodes, [], {}, half_life=half_life_of(self.config))

    # -- the executor's side ---------------------------------------------------------------

    def logs(self, job: str, task: str, stream: LogStream) -> TaskLog | None:
        """``stream`` of ``task`` of ``job``, read through the executor wherever the task
        ran; None when the executor keeps no logs. Any thread may call it (no lock)."""
        executor = self.core.executor
        return executor.logs(job, task, stream) if isinstance(executor, LogSource) else None

    def _launch(self, bind: Bind) -> TaskLaunch:
        life = self.core.life.jobs[bind.job]
        snapshot = self.core.state.snapshot
        nodes = snapshot.nodes
        gang = tuple(
            GangMember(
                role=task.role.name,
                index=task.index,
                node=nodes[task.node].name,
                address=nodes[task.node].address,
            )
            for task in self.core.life.tasks(life)
            if task.status in ON_NODE
        )
        address = nodes[snapshot.node_index[bind.node]].address
        identity = None if self._identity_of is None else self._identity_of(life.job.user)
        digest = next(r.model_digest for r in life.job.roles if r.name == bind.role)
        model = None
        if digest is not None and self._model_cache is not None:
            model = str(self._model_cache.path(digest))
        role = next(r for r in life.job.roles if r.name == bind.role)
        env, files = secret_parts(life.job.user, role.secrets, self._secrets)
        datasets: dict[str, str] = {}
        copies: tuple[DatasetCopy, ...] = ()
        inputs = self._datasets
        if role.datasets and inputs is not None and inputs.cache is not None:
            cache = inputs.cache
            datasets = {name: str(cache.path(d)) for name, d in role.datasets if d is not None}
        elif role.datasets and inputs is not None:
            with self.db.session() as session:
                copies = inputs.for_task(session, life.job.user, role.datasets)
        return launch_of(
            life.job,
            bind,
            gang,
            address=address,
            identity=identity,
            attempt=life.attempts + 1,
            model_path=model,
            model_digest=digest,
            datasets=datasets,
            dataset_copies=copies,
            secret_env=env,
            secret_files=files,
        )

    def _record_processes(self) -> None:
        """Persist a record for every task the executor started since the last tick."""
        executor = self.core.executor
        if not isinstance(executor, Recoverable):
            return
        fresh = [r for r in executor.records() if (r.job, r.task) not in self._recorded]
        live = {(r.job, r.task) for r in executor.records()}
        self._recorded &= live
        if not fresh:
            return
        with self.db.write() as session:
            for record in fresh:
                rows = self.core.rows.get(record.job)
                if rows is None or record.task not in rows.tasks:
                    continue
                self.core.journal.task(rows.tasks[record.task], process=record.to_dict())
                self._recorded.add((record.job, record.task))
            self.core.journal.flush(session)
