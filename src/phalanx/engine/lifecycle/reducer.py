"""The one job lifecycle, which the control plane and the simulator both drive.

``Lifecycle`` holds the engine's ``ClusterState`` and what outlives a session of each
live job (``JobLife``). Its inputs are what happens to jobs: a job arrives (``submit``),
a session decides (``apply``), an executor reports (``on_event``), time passes
(``advance``: retry backoffs end, walltimes run out), a user cancels (``cancel``), an
admin drains a node (``drain``). Each returns the effects of that input, in order, for
its driver to record and carry out; it never does I/O and never reads a clock.

The rules, each in one place:

- Every change of a task's or a job's phase goes through the transition tables of
  ``phalanx.domain.lifecycle``; an illegal one raises ``IllegalTransition`` (a bug).
- A failed, lost or unstartable task fails its attempt: the whole gang is stopped and
  the job is Pending again after a backoff that doubles with each attempt
  (``RetryPolicy``), until ``maxRetry`` retries are spent; then it is Failed.
- An eviction that leaves a gang below its minimum stops the rest: the job is Pending
  again at once, and that costs no retry. Every session eviction counts a preemption.
- Walltime counts from the attempt's first placement; past it the job is stopped and
  Failed for good (Slurm's TIMEOUT). Cancel stops the job for good: Cancelled.
- A running job whose GPUs sat idle for its queue's window (``idle``'s verdicts) is
  stopped and Failed for good, or, elastic and above its minimum, shrunk to it.
- A role with ``dependsOn`` is placed with its gang, but started only once every role
  it names is Running; a stopped task that was never started needs no executor.
- A job becomes Succeeded once none of its tasks holds a node and one of them succeeded.
- An elastic role grows by the engine's ``Resize`` and by ``scale``; a replica of it
  that stops while the role is above the size its owner asks for leaves the job, which
  runs on and spends nothing (``sizes``). In ``restart`` mode every change of size
  restarts the gang at the new size instead (no retry spent).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import HOLDS_RESOURCES, Job, JobPhase, RescaleMode, Role, Task, TaskPhase
from phalanx.domain.progress import Progress
from phalanx.engine.decisions import Bind, Decisions, Evict, Resize, by_job
from phalanx.engine.lifecycle.effects import (
    OOM_KILLED,
    Effect,
    EventKind,
    Start,
    Stop,
    TaskEvent,
    TaskEventKind,
    Waiting,
)
from phalanx.engine.lifecycle.jobs import FOR_GOOD, Ending, JobLife
from phalanx.engine.lifecycle.ledger import TERMINAL
from phalanx.engine.lifecycle.sizes import Sizes
from phalanx.engine.snapshot import ON_NODE, TaskInfo, TaskStatus

#: What a job becomes once its tasks have stopped, for each ending: (phase, reason code).
_SETTLED = {
    Ending.CANCEL: (JobPhase.CANCELLED, "Cancelled"),
    Ending.WALLTIME: (JobPhase.FAILED, "WalltimeExceeded"),
    Ending.FAIL: (JobPhase.FAILED, "RetriesExhausted"),
    Ending.RETRY: (JobPhase.PENDING, "Retrying"),
    Ending.RETRY_NOW: (JobPhase.PENDING, "Retrying"),
    Ending.RESTART: (JobPhase.PENDING, "Preempted"),
    Ending.ABORT: (JobPhase.FAILED, "Aborted"),
    Ending.IDLE: (JobPhase.FAILED, "IdleGpus"),
}
_WAITING = (JobPhase.PENDING, JobPhase.QUEUED)
_ALIVE = (TaskStatus.BOUND, TaskStatus.RUNNING)


#: The order ``Lifecycle.apply`` records a session's decisions in, by field of
#: ``Decisions``: a job's evictions before any job's binds, which may use what they free.
STAGES: Final = ("admitted", "evictions", "binds", "resized", "unschedulable")


def parts_by_job(decisions: Decisions) -> list[tuple[str, Decisions]]:
    """``decisions`` cut into one part per job and stage, in ``apply``'s order (stage
    by stage, jobs in first-seen order): applying the parts in turn records what
    applying the whole does, and a driver can fail one job's part alone."""
    return [
        (job, Decisions(**{stage: tuple(mine)}))
        for stage in STAGES
        for job, mine in by_job(getattr(decisions, stage)).items()
    ]


class Lifecycle(Sizes):
    """The one job lifecycle: every input returns its effects, in order."""

    # -- jobs coming and going ----------------------------------------------------------

    def submit(self, job: Job, *, now: float) -> list[Effect]:
        """Track a new job, Pending. One the engine cannot take gets a ``Waiting`` with
        reason ``Invalid`` and waits outside the state (a later ``rebuild`` retries it)."""
        self.now = now
        life = JobLife(job=replace(job, tasks=()) if job.tasks else job, phase=JobPhase.PENDING)
        self.jobs[job.name] = life
        self._track(life, job)
        return self._flush()

    def restore(self, life: JobLife, current: Job, *, now: float) -> list[Effect]:
        """Track a job read back after a restart; ``current`` holds its tasks as stored.

        A task stored on a node the cluster no longer has cannot be reconciled: the job
        is Failed with that reason (every task of it is asked to stop, that one too), and
        the rest goes on.
        """
        self.now = now
        self.jobs[life.name] = life
        if life.not_before is not None:
            self._deadline(life.not_before, life.name)
            return self._flush()
        known = self.state.snapshot.node_index
        vanished = [
            t
            for t in current.tasks
            if t.phase in HOLDS_RESOURCES and (t.node is None or t.node not in known)
        ]
        if vanished:  # tracked as failed: the engine cannot hold a task on no node
            failed = [replace(t, phase=TaskPhase.FAILED, node=None) for t in vanished]
            tasks = {id(t): f for t, f in zip(vanished, failed, strict=True)}
            current = replace(current, tasks=tuple(tasks.get(id(t), t) for t in current.tasks))
        self._track(life, current)
        if life.started_at is not None and life.job.walltime is not None:
            self._deadline(life.started_at + life.job.walltime, life.name)
        self._hold_waiting(life)
        if vanished:
            self._abandon(life, vanished)
        return self._flush()

    def _abandon(self, life: JobLife, vanished: list[Task]) -> None:
        """Tasks stored on nodes the cluster no longer has: each is asked to stop wherever
        it may still run, and the job is given up."""
        stops = tuple(
            Evict(
                job=life.name,
                task=t.name(life.name),
                node=t.node or "",
                action="abort",
                by=life.name,
                reason=f"node {t.node} is not in the cluster",
            )
            for t in vanished
        )
        self._out.append(Stop(evictions=stops))
        gone = vanished[0]
        message = (
            f"task {gone.name(life.name)} was on node {gone.node}, which the cluster no "
            "longer has; fix: resubmit the job"
        )
        self._abort(life, message)

    # -- inputs -----------------------------------------------------------------------------

    def apply(self, decisions: Decisions, *, now: float) -> list[Effect]:
        """Record what a session decided, stage by stage (``STAGES``: admissions,
        evictions, binds, new sizes, pending reasons). Applying each of
        ``parts_by_job(decisions)`` in turn records the same, a job at a time."""
        self.now = now
        for admit in decisions.admitted:
            life = self.jobs[admit.job]
            self._phase(life, JobPhase.QUEUED, "Admitted", f"admitted to queue {life.job.queue}")
        for name, evictions in by_job(decisions.evictions).items():
            self._evicted(self.jobs[name], evictions)
        for name, binds in by_job(decisions.binds).items():
            self._place(self.jobs[name], binds)
        for name, resizes in by_job(decisions.resized).items():
            for resize in resizes:
                self._resize(self.jobs[name], resize)
        for item in decisions.unschedulable:
            waiting = self.jobs.get(item.job)
            key = (item.reason.code.value, item.reason.message)
            if waiting is not None and waiting.reason != key and waiting.phase in _WAITING:
                waiting.reason = key
                self._out.append(Waiting(job=item.job, code=key[0], message=key[1]))
        return self._flush()

    def on_event(self, event: TaskEvent, *, now: float) -> list[Effect]:
        """Apply one executor report. A report is ignored unless its task holds a node, and
        that node is the one it names (a report from before the task was placed again is
        stale), and the executor was asked to start it (it is not held for ``dependsOn``)."""
        self.now = now
        life = self.jobs.get(event.job)
        task = None if life is None else self._tasks.get(event.job, {}).get(event.task)
        if life is None or task is None or task.status not in ON_NODE or task.name in life.held:
            return []
        if self.state.snapshot.nodes[task.node].name != event.node:
            return []
        if event.kind is TaskEventKind.STARTED:
            if task.status is TaskStatus.BOUND:
                self._task(task, TaskPhase.RUNNING, at=event.time)
                self._start_ready(life)
            return self._flush()
        if event.kind is TaskEventKind.EXITED and task.status is TaskStatus.BOUND:
            # It ran: its STARTED was not seen (reported before a crash of the server).
            self._task(task, TaskPhase.RUNNING, at=event.time)
        if task.status is TaskStatus.RELEASING or event.stopped:
            self._stopped(life, task, event.exit_code, at=event.time)
        elif event.kind is TaskEventKind.EXITED and event.exit_code == 0:
            self._task(task, TaskPhase.SUCCEEDED, exit_code=0, at=event.time)
        else:
            self._task(task, TaskPhase.FAILED, exit_code=event.exit_code, at=event.time)
            if life.ending is None:
                self._fail(life, task.name, _failure(event), how=_retry_of(event))
        self._settle(life)
        return self._flush()

    def advance(self, *, now: float) -> list[Effect]:
        """Let time pass to ``now``: retried jobs whose backoff ended go back to the engine,
        jobs past their walltime are stopped (``due`` jobs, each by ``advance_job``)."""
        effects = []
        for name in self.due(now):
            effects += self.advance_job(name, now=now)
        return effects

    def due(self, now: float) -> list[str]:
        """The jobs whose backoff or walltime ends by ``now``, earliest first (each once)."""
        names: dict[str, None] = {}
        while self._deadlines and self._deadlines[0][0] <= now:
            names[heapq.heappop(self._deadlines)[2]] = None
        return list(names)

    def advance_job(self, name: str, *, now: float) -> list[Effect]:
        """Let time pass to ``now`` for job ``name`` alone (see ``advance``)."""
        self.now = now
        life = self.jobs.get(name)
        if life is None:
            return []
        if life.not_before is not None and life.not_before <= now:
            life.not_before = None
            self._counters(life)
            self._track(life, life.job)
        deadline = self._walltime_deadline(life)
        if deadline is not None and deadline <= now:
            assert life.job.walltime is not None
            self._end(life, Ending.WALLTIME, f"ran past its walltime of {life.job.walltime:g} s")
            self._stop(life, self.tasks(life), "walltime", life.ending_message)
            self._settle(life)
        return self._flush()

    def cancel(self, name: str, message: str, *, now: float) -> list[Effect]:
        """Stop every task of job ``name``; it is Cancelled once they have stopped."""
        self.now = now
        life = self.jobs.get(name)
        if life is None or life.phase in TERMINAL or life.ending is Ending.CANCEL:
            return []
        self._end(life, Ending.CANCEL, message)
        if not life.in_state:  # waiting out a backoff, or never placeable
            self._phase(life, JobPhase.CANCELLED, "Cancelled", message)
            self._forget(life)
            return self._flush()
        self._stop(life, self.tasks(life), "cancel", message)
        self._settle(life)
        return self._flush()

    def stop_idle(self, name: str, message: str, *, now: float) -> list[Effect]:
        """Job ``name``'s GPUs sat idle (``message`` says how): an elastic job whose role
        has more tasks than its minimum is shrunk to it and runs on; any other running
        job is stopped and Failed (``IdleGpus``), not retried. Each says an ``Idle``
        event. A job not running, or being stopped already, is left alone."""
        self.now = now
        life = self.jobs.get(name)
        if life is None or life.phase is not JobPhase.RUNNING or life.ending is not None:
            return []
        role = life.job.elastic_role()
        if role is not None and role.elastic is not None:
            low = role.elastic.min_replicas
            if len(self._role_tasks(life, role.name)) > low:
                self._event(life, EventKind.IDLE, f"{message}: shrunk to its minimum of {low}")
                self._ask(life, role, low)
                self._resize(life, Resize(job=name, role=role.name, size=low, reason=message))
                return self._flush()
        self._end(life, Ending.IDLE, f"{message}: stopped")
        self._event(life, EventKind.IDLE, life.ending_message)
        self._stop(life, self.tasks(life), "idle", life.ending_message)
        self._settle(life)
        return self._flush()

    def mark_idle(self, name: str, message: str, *, now: float) -> list[Effect]:
        """Job ``name``'s GPUs sat idle (``message`` says how): an ``Idle`` event, the job
        unchanged (none for a job that is not running)."""
        self.now = now
        life = self.jobs.get(name)
        if life is None or life.phase is not JobPhase.RUNNING:
            return []
        fix = "fix: put its GPUs to work, or end it to free them for others"
        self._event(life, EventKind.IDLE, f"{message}: marked idle; {fix}")
        return self._flush()

    def report(self, name: str, progress: Progress) -> None:
        """Job ``name`` reported its progress (kept for the engine while it is tracked)."""
        life = self.jobs.get(name)
        if life is not None and life.in_state:
            self.state.report(name, progress)

    def scale(self, name: str, replicas: int, message: str, *, now: float) -> list[Effect]:
        """Set the size the owner of job ``name`` asks of its elastic role: replicas are
        added (Pending) or the highest are stopped and leave. Raises ``InvalidInput`` when
        the job has no elastic role or ``replicas`` is outside its range."""
        self.now = now
        life = self.jobs.get(name)
        role = None if life is None else life.job.elastic_role()
        if life is None or role is None or role.elastic is None:
            raise InvalidInput(
                f"job {name!r} has no elastic role",
                field="replicas",
                fix="scale a running job whose role has elastic: {minReplicas, maxReplicas}",
            )
        low, high = role.elastic.min_replicas, role.elastic.max_replicas
        if not low <= replicas <= high:
            raise InvalidInput(
                f"{replicas} replicas is outside the elastic range {low}..{high}",
                field="replicas",
                fix=f"give {low}..{high}",
            )
        self._ask(life, role, replicas)
        if life.in_state and life.ending is None and life.phase not in TERMINAL:
            self._resize(life, Resize(job=name, role=role.name, size=replicas, reason=message))
        return self._flush()

    def drain(self, node: str, *, now: float) -> list[Effect]:
        """Stop every task on ``node``; gangs left below their minimum restart whole."""
        self.now = now
        index = self.state.snapshot.node_index.get(node)
        if index is None:
            return []
        reason = f"node {node} is draining"
        for life in list(self.jobs.values()):
            tasks = [t for t in self.tasks(life) if t.node == index and t.status in _ALIVE]
            if tasks:
                self._stop(life, tasks, "drain", reason)
                self._restart_if_broken(life, reason)
        return self._flush()

    def unstarted(
        self, name: str, tasks: Iterable[str], reason: str, *, now: float
    ) -> list[Effect]:
        """Tasks of job ``name`` that were bound and never started (a restart of the
        server cut their launch short, and no node has a record of them): its gang
        restarts at once and costs no retry, as an eviction below its minimum does;
        these tasks have stopped at once (they have no process), the others are stopped."""
        self.now = now
        life = self.jobs.get(name)
        if life is None or life.phase in TERMINAL:
            return []
        mine, nodes = self._tasks.get(name, {}), self.state.snapshot.nodes
        for task in tasks:
            info = mine.get(task)
            if info is not None and info.status is TaskStatus.BOUND:  # no process to stop
                life.held[task] = Bind(
                    job=name,
                    task=task,
                    role=info.role.name,
                    index=info.index,
                    node=nodes[info.node].name,
                    gpus=info.gpus,
                )
        if life.ending is None:
            self._end(life, Ending.RESTART, reason)
        self._stop(life, self.tasks(life), "restart", f"gang restart: {reason}")
        self._settle(life)
        return self._flush()

    def abort(self, name: str, message: str, *, now: float) -> list[Effect]:
        """End job ``name`` as Failed for good (no retry), for what its driver cannot
        handle (a bug met while handling it); its tasks are stopped first."""
        self.now = now
        life = self.jobs.get(name)
        if life is not None and life.phase not in TERMINAL:
            self._abort(life, message)
        return self._flush()

    # -- rules ------------------------------------------------------------------------------

    def _evicted(self, life: JobLife, evictions: list[Evict]) -> None:
        first = evictions[0]
        tasks = self._tasks.get(life.name, {})
        stopping = [tasks[e.task] for e in evictions if e.task in tasks]
        message = _eviction_message(first)
        role = life.job.elastic_role()
        if role is not None and role.elastic is not None and self._keeps_gang(life, stopping):
            if role.elastic.mode is RescaleMode.RESTART:
                size = len(self._role_tasks(life, role.name)) - len(stopping)
                self._restart_at(life, role.name, size, message)
                return
            # the job shrinks and runs on: no preemption counted, no restart
            self._stop(life, stopping, first.action, first.reason, by=first.by, message=message)
            return
        life.preemptions += 1
        self._counters(life)
        self._stop(life, stopping, first.action, first.reason, by=first.by, message=message)
        self._restart_if_broken(life, message)

    def _keeps_gang(self, life: JobLife, stopping: list[TaskInfo]) -> bool:
        alive = sum(1 for t in self.tasks(life) if t.status in _ALIVE)
        return alive - len(stopping) >= self.state.job(life.name).min_available

    def _resize(self, life: JobLife, resize: Resize) -> None:
        """Make the elastic role ``resize.size`` tasks: stop the running ones
        ``resize.leaving`` names (they leave the job), then add Pending ones, or stop the
        highest (those never started leave at once). Restart mode restarts the gang."""
        if not life.in_state or life.ending is not None:
            return
        mine = sorted(self._role_tasks(life, resize.role), key=lambda t: -t.index)
        role = life.job.elastic_role()
        assert role is not None and role.elastic is not None
        if role.elastic.mode is RescaleMode.RESTART and any(t.status in _ALIVE for t in mine):
            if len(mine) != resize.size:
                self._restart_at(life, resize.role, resize.size, resize.reason)
            return
        if resize.size < role.kept_replicas:
            # The engine's policy shrinks the job below the size it asked for (never
            # below its minimum): that is its ask now, so the leaving replicas leave
            # rather than wait to be placed again. Growth above it is lent, as ever.
            self._ask(life, role, max(resize.size, role.elastic.min_replicas))
        moving, leaving, staying = _departures(mine, resize)
        if resize.size > staying:
            self._add_tasks(life, resize.role, resize.size - staying, resize.reason)
        self._let_go(life, resize, moving, leaving)

    def _ask(self, life: JobLife, role: Role, replicas: int) -> None:
        """The job's elastic ``role`` asks for ``replicas`` from now on (its tasks are not
        changed)."""
        roles = tuple(replace(r, replicas=replicas) if r is role else r for r in life.job.roles)
        life.job = replace(life.job, roles=roles)

    def _let_go(self, life: JobLife, resize: Resize, moving: set[str], leaving: set[str]) -> None:
        """Stop the tasks of ``resize.role`` named in ``moving`` (re-placed elsewhere) and
        those in ``leaving`` that hold a node (shrunk); drop those in ``leaving`` still
        Pending. Each set is read from the tasks as tracked at that moment."""

        def now_of(names: set[str]) -> list[TaskInfo]:  # tracking anew replaces TaskInfos
            return [t for t in self._role_tasks(life, resize.role) if t.name in names]

        # the moved replicas are surplus now (the role has its size without them)
        self._stop(
            life, now_of(moving), "shrink", resize.reason, message=f"re-placed: {resize.reason}"
        )
        on_node = [t for t in now_of(leaving) if t.status in _ALIVE]
        self._stop(life, on_node, "shrink", resize.reason, message=f"shrunk: {resize.reason}")
        pending = [t for t in now_of(leaving) if t.status is TaskStatus.PENDING]
        self._drop_tasks(life, pending, resize.reason)

    def _restart_at(self, life: JobLife, role: str, size: int, reason: str) -> None:
        """Stop the whole gang and start it again with ``size`` replicas of ``role`` (a
        restart-mode rescale: the tasks checkpoint on SIGTERM); no retry is spent."""
        before = len(self._role_tasks(life, role))
        life.restart_size = (size, f"{reason} (the gang restarted)")
        message = f"{role}: {before} -> {size} replicas: {reason}"
        self._end(life, Ending.RESTART, f"rescaling, {message}")
        self._stop(life, self.tasks(life), "rescale", message)

    def _place(self, life: JobLife, binds: list[Bind]) -> None:
        tasks = self._tasks[life.name]
        for bind in binds:
            self._task(tasks[bind.task], TaskPhase.BOUND, node=bind.node, gpus=bind.gpus)
        if life.started_at is None:
            life.started_at = self.now
            self._counters(life)
            if life.job.walltime is not None:
                self._deadline(self.now + life.job.walltime, life.name)
        nodes = sorted({b.node for b in binds})
        message = f"{len(binds)} task(s) placed on {', '.join(nodes[:8])}" + (
            f" and {len(nodes) - 8} more nodes" if len(nodes) > 8 else ""
        )
        life.reason = None
        if life.phase is JobPhase.PENDING:  # a config without enqueue admits by placing
            self._phase(life, JobPhase.QUEUED, "Admitted", f"admitted to queue {life.job.queue}")
        self._event(life, EventKind.PLACED, message, binds=tuple(binds))
        self._phase(life, JobPhase.RUNNING, "Placed", message)
        for bind in binds:
            life.held[bind.task] = bind
        self._start_ready(life)

    def _start_ready(self, life: JobLife) -> None:
        """Start every held task whose ``dependsOn`` roles are all Running."""
        if not life.held:
            return
        waiting = self._waiting_roles(life)
        ready = tuple(bind for bind in life.held.values() if bind.role not in waiting)
        for bind in ready:
            del life.held[bind.task]
        if ready:
            self._out.append(Start(binds=ready))

    def _hold_waiting(self, life: JobLife) -> None:
        """After a restart: Bound tasks whose ``dependsOn`` roles are not all Running were
        held, never started; hold them again (their binds rebuilt from the stored node and
        GPUs: a GPU share's MPS limits are not stored, so such a task starts without them)."""
        waiting = self._waiting_roles(life)
        nodes = self.state.snapshot.nodes
        for task in self.tasks(life):
            if task.status is TaskStatus.BOUND and task.role.name in waiting:
                life.held[task.name] = Bind(
                    job=life.name,
                    task=task.name,
                    role=task.role.name,
                    index=task.index,
                    node=nodes[task.node].name,
                    gpus=task.gpus,
                )

    def _waiting_roles(self, life: JobLife) -> set[str]:
        """Roles that may not start yet: some role they depend on is not all Running."""
        running: dict[str, bool] = {}
        for task in self.tasks(life):
            running[task.role.name] = running.get(task.role.name, True) and (
                task.status is TaskStatus.RUNNING
            )
        return {
            role.name
            for role in life.job.roles
            if not all(running.get(dep, False) for dep in role.depends_on)
        }

    def _fail(self, life: JobLife, task: str, message: str, *, how: Ending) -> None:
        """A task failed: restart the whole gang (``how``: after a backoff, RETRY; at once,
        RETRY_NOW), or fail the job when no retries are left or ``how`` is FAIL (no retry
        can fix it)."""
        life.attempts += 1
        retries = life.job.max_retry
        if how is Ending.FAIL:
            self._end(life, Ending.FAIL, f"{message}; not retried: a retry cannot fix this")
        elif life.attempts <= retries:
            at_once = " at once (the node failed, not the job)" if how is Ending.RETRY_NOW else ""
            self._end(life, how, f"{message}; retry {life.attempts} of {retries}{at_once}")
        else:
            self._end(life, Ending.FAIL, f"{message}; no retries left (maxRetry {retries})")
        self._event(life, EventKind.TASK_FAILED, life.ending_message, tasks=(task,))
        self._stop(life, self.tasks(life), "restart", message)

    def _abort(self, life: JobLife, message: str) -> None:
        """Stop the job for good: Failed (``Aborted``) once its tasks have stopped, at once
        when it is outside the engine (waiting out a backoff, or never taken in)."""
        if not life.in_state:
            self._phase(life, JobPhase.FAILED, _SETTLED[Ending.ABORT][1], message)
            self._forget(life)
            return
        self._end(life, Ending.ABORT, message)
        self._stop(life, self.tasks(life), "abort", message)
        self._settle(life)

    def _restart_if_broken(self, life: JobLife, reason: str) -> None:
        """A gang left below its minimum restarts whole (no retry spent)."""
        alive = [t for t in self.tasks(life) if t.status in _ALIVE]
        if life.ending is None and alive and len(alive) < self.state.job(life.name).min_available:
            self._end(life, Ending.RESTART, reason)
            self._stop(life, alive, "restart", f"gang restart: {reason}")

    def _stop(
        self,
        life: JobLife,
        tasks: Iterable[TaskInfo],
        action: str,
        reason: str,
        *,
        by: str | None = None,
        message: str | None = None,
    ) -> None:
        """Stop ``tasks`` (those on a node and not stopping yet): each becomes Releasing.
        One never handed to the executor (held for ``dependsOn``) has stopped at once."""
        nodes = self.state.snapshot.nodes
        stops, unstarted = [], []
        for task in tasks:
            if task.status not in _ALIVE:
                continue
            self._task(task, TaskPhase.RELEASING)
            life.stopping[task.name] = reason
            if life.held.pop(task.name, None) is not None:
                unstarted.append(task)
                continue
            stops.append(
                Evict(
                    job=life.name,
                    task=task.name,
                    node=nodes[task.node].name,
                    action=action,
                    by=by or life.name,
                    reason=reason,
                )
            )
        if stops or unstarted:
            count = len(stops) + len(unstarted)
            text = message or f"stopped ({action}): {reason}"
            self._event(life, EventKind.EVICTED, f"{count} task(s) {text}", stops=tuple(stops))
        if stops:
            self._out.append(Stop(evictions=tuple(stops)))
        for task in unstarted:
            self._stopped(life, task, None, at=self.now)

    def _stopped(self, life: JobLife, task: TaskInfo, code: int | None, *, at: float) -> None:
        """A task asked to stop has: Failed when its job ends for good, else Pending."""
        phase = TaskPhase.FAILED if life.ending in FOR_GOOD else TaskPhase.PENDING
        if task.status is not TaskStatus.RELEASING:
            self._task(task, TaskPhase.RELEASING)
        self._task(task, phase, exit_code=code, at=at)
        why = life.stopping.pop(task.name, "it stopped")
        if phase is TaskPhase.PENDING and self._is_surplus(life, task):
            self._drop_tasks(life, [task], why)

    def _settle(self, life: JobLife) -> None:
        """Once no task of the job holds a node, decide what the job becomes."""
        tasks = self.tasks(life)
        if any(t.status in ON_NODE for t in tasks):
            return
        ending = life.ending
        if ending is None:
            if life.phase is JobPhase.RUNNING and any(
                t.status is TaskStatus.SUCCEEDED for t in tasks
            ):
                self._phase(life, JobPhase.SUCCEEDED, "Completed", "every running task succeeded")
                self._forget(life)
            elif life.phase is JobPhase.RUNNING:
                self._phase(life, JobPhase.PENDING, "Preempted", "every task was evicted")
                life.started_at = None  # its next placement starts a new attempt's walltime
                life.held.clear()
                self._counters(life)
            return
        phase, reason = _SETTLED[ending]
        if phase is JobPhase.PENDING:
            for task in tasks:
                if task.status is not TaskStatus.PENDING:
                    self._task(task, TaskPhase.PENDING)
            life.started_at = None
            life.held.clear()
        self._phase(life, phase, reason, life.ending_message)
        life.ending, life.ending_message = None, ""
        if phase in TERMINAL:
            self._forget(life)
            return
        if phase is JobPhase.PENDING:  # a new attempt: its elastic role at the size asked
            self._restart_size(life)
        if ending is Ending.RETRY:
            life.not_before = self.now + self.policy.delay(life.attempts)
            self._deadline(life.not_before, life.name)
            self._untrack(life)
        self._counters(life)

    def _end(self, life: JobLife, ending: Ending, message: str) -> None:
        """Say why the job's tasks are being stopped (kept across a restart of the server)."""
        life.ending, life.ending_message = ending, message
        self._counters(life)


def _departures(mine: list[TaskInfo], resize: Resize) -> tuple[set[str], set[str], int]:
    """Of an elastic role's tasks ``mine`` (highest index first), resized by ``resize``:
    the names of those that move (alive, and named in ``resize.leaving``), of those that
    leave (the highest of the others beyond ``resize.size``), and how many of the others
    there are (those that leave among them)."""
    named = set(resize.leaving)
    moving = {t.name for t in mine if t.name in named and t.status in _ALIVE}
    staying = [t for t in mine if t.name not in moving]
    leaving = {t.name for t in staying[: max(len(staying) - resize.size, 0)]}
    return moving, leaving, len(staying)


def _eviction_message(evict: Evict) -> str:
    """``preempted by J: why``, ``shrunk for J: why`` ..., for the job's events."""
    verb = "shrunk for" if evict.action == "shrink" else f"{evict.action}ed by"
    return f"{verb} {evict.by}: {evict.reason}"


def _retry_of(event: TaskEvent) -> Ending:
    """How an attempt that ``event`` failed is retried: at once after a lost node (the
    job did nothing wrong), never after a start no retry can fix, else after a backoff."""
    if event.kind is TaskEventKind.LOST:
        return Ending.RETRY_NOW
    if event.kind is TaskEventKind.FAILED_TO_START and not event.retriable:
        return Ending.FAIL
    return Ending.RETRY


def _failure(event: TaskEvent) -> str:
    """Why a task's failure failed its attempt, for the job's message."""
    task = event.task
    if event.kind is TaskEventKind.LOST:
        why = f": {event.message}" if event.message else ""
        return f"task {task} was lost with its node {event.node}{why}"
    if event.kind is TaskEventKind.FAILED_TO_START:
        return f"task {task} could not start on {event.node}: {event.message}"
    why = ""
    if event.reason == OOM_KILLED:
        why = f" ({OOM_KILLED}: the kernel killed it for going over its memory limit)"
    elif event.reason:
        why = f" ({event.reason})"
    return f"task {task} exited with code {event.exit_code}{why}"
