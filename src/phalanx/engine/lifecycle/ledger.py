"""The lifecycle's books: live jobs, the engine state they are in, and the primitives
every rule uses to change them (each checked against the transition tables, each
said as an effect)."""

from __future__ import annotations

import heapq
from dataclasses import replace

from phalanx.domain.job import Job, JobPhase, Task, TaskPhase
from phalanx.domain.lifecycle import check_job_transition, check_task_transition
from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.lifecycle.effects import (
    Effect,
    Event,
    EventKind,
    JobChanged,
    JobCounters,
    Stop,
    TaskChanged,
    Waiting,
)
from phalanx.engine.lifecycle.jobs import JobLife, RetryPolicy
from phalanx.engine.snapshot import ON_NODE, STATUS_OF_PHASE, TaskInfo
from phalanx.engine.state import ClusterState

#: The lifecycle phase of each engine status a tracked task can have.
PHASE_OF_STATUS = {status: phase for phase, status in STATUS_OF_PHASE.items()}

TERMINAL = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})


class Ledger:
    """Live jobs and the engine state they are in. Changes go through the primitives
    below, which check the transition tables and collect effects until ``_flush``."""

    def __init__(self, state: ClusterState, policy: RetryPolicy | None = None) -> None:
        self.state = state
        self.policy = policy or RetryPolicy()
        self.jobs: dict[str, JobLife] = {}
        self.now = 0.0
        self._out: list[Effect] = []
        self._tasks: dict[str, dict[str, TaskInfo]] = {}  # per job in the state: by name
        self._deadlines: list[tuple[float, int, str]] = []  # (when, seq, job): re-checked
        self._seq = 0

    def current(self, life: JobLife) -> Job:
        """A tracked job as the engine holds it now (phase, task states, attained service)."""
        info = self.state.job(life.name)
        nodes = self.state.snapshot.nodes
        tasks = tuple(
            Task(
                role=task.role.name,
                index=task.index,
                phase=PHASE_OF_STATUS[task.status],
                node=nodes[task.node].name if task.node >= 0 else None,
                start_time=task.start_time,
                gpus=task.gpus,
            )
            for task in info.tasks
        )
        return replace(
            life.job,
            phase=life.phase,
            pending_since=info.pending_since,
            attained_service=info.attained_service,
            progress=info.spec.progress,
            tasks=tasks,
        )

    def tasks(self, life: JobLife) -> list[TaskInfo]:
        """The job's tasks in the engine's state (none while it waits outside it)."""
        return self.state.job(life.name).tasks if life.in_state else []

    def next_deadline(self) -> float | None:
        """When ``advance`` next has something to do (a backoff or a walltime ends)."""
        while self._deadlines:
            when, _, name = self._deadlines[0]
            life = self.jobs.get(name)
            if life is not None and when in (life.not_before, self._walltime_deadline(life)):
                return when
            heapq.heappop(self._deadlines)
        return None

    def rebuild(self, state: ClusterState) -> list[Effect]:
        """Use ``state`` (new queues) with every tracked job in it as it is now, and the
        users' usage so far; jobs the old state could not take are tried again."""
        state.snapshot.usage = self.state.snapshot.usage.carried(state.snapshot.dims)
        live = [(life, self.current(life)) for life in self.jobs.values() if life.in_state]
        orphans = [
            life for life in self.jobs.values() if not life.in_state and life.not_before is None
        ]
        self.state = state
        self._tasks.clear()
        for life, job in live:
            life.in_state = False
            self._track(life, job)
        for life in orphans:
            self._track(life, life.job)
        return self._flush()

    def drop(self, name: str, message: str) -> list[Effect]:
        """The last resort when even ``abort`` raised for job ``name`` (a bug): forget the
        job without the transition tables, asking the executor to stop what it runs,
        and say it Failed. What the failed calls left unsaid is not said."""
        self._out.clear()
        life = self.jobs.pop(name, None)
        if life is None:
            return []
        nodes = self.state.snapshot.nodes
        stops = tuple(
            Evict(
                job=name,
                task=t.name,
                node=nodes[t.node].name,
                action="abort",
                by=name,
                reason=message,
            )
            for t in self.tasks(life)
            if t.status in ON_NODE and t.name not in life.held
        )
        self._untrack(life)
        phase = JobPhase.FAILED
        return [
            Stop(evictions=stops),
            JobChanged(job=name, phase=phase, reason="Aborted", message=message, time=self.now),
            Event(job=name, kind=EventKind.FAILED, message=message, time=self.now),
        ]

    # -- the primitives every rule uses -----------------------------------------------------

    def _phase(self, life: JobLife, phase: JobPhase, reason: str, message: str) -> None:
        if phase is life.phase:
            return
        check_job_transition(life.phase, phase)
        life.phase = phase
        if life.in_state:
            pending_since = self.now if phase is JobPhase.PENDING else None
            self.state.set_phase(life.name, phase, pending_since=pending_since)
        self._out.append(
            JobChanged(job=life.name, phase=phase, reason=reason, message=message, time=self.now)
        )
        self._event(life, EventKind(phase.value), message or reason)

    def _task(
        self,
        task: TaskInfo,
        phase: TaskPhase,
        *,
        node: str | None = None,
        gpus: tuple[int, ...] = (),
        exit_code: int | None = None,
        at: float | None = None,
    ) -> None:
        current = PHASE_OF_STATUS[task.status]
        if current is not phase:
            check_task_transition(current, phase)
        nodes = self.state.snapshot.nodes
        if phase is TaskPhase.BOUND:
            self.state.set_task(task, phase, node, start_time=self.now, gpus=gpus)
        elif phase in (TaskPhase.RUNNING, TaskPhase.RELEASING):
            node = nodes[task.node].name
            self.state.set_task(task, phase, node)
            gpus = task.gpus
        else:
            self.state.set_task(task, phase, now=self.now)
        self._out.append(
            TaskChanged(
                job=task.job.name,
                task=task.name,
                role=task.role.name,
                phase=phase,
                previous=current,
                time=self.now if at is None else at,
                node=node,
                gpus=gpus,
                exit_code=exit_code,
            )
        )

    def _event(
        self,
        life: JobLife,
        kind: EventKind,
        message: str,
        *,
        binds: tuple[Bind, ...] = (),
        stops: tuple[Evict, ...] = (),
        tasks: tuple[str, ...] = (),
    ) -> None:
        self._out.append(
            Event(
                job=life.name,
                kind=kind,
                message=message,
                time=self.now,
                binds=binds,
                stops=stops,
                tasks=tasks,
            )
        )

    def _counters(self, life: JobLife) -> None:
        self._out.append(
            JobCounters(
                job=life.name,
                attempts=life.attempts,
                preemptions=life.preemptions,
                not_before=life.not_before,
                started_at=life.started_at,
                ending=life.ending,
                ending_message=life.ending_message,
            )
        )

    def _track(self, life: JobLife, job: Job) -> None:
        """Put a job into the engine's state; an orphan gets its reason said instead."""
        info = self.state.add_job(job)
        if info is None:
            orphans = self.state.snapshot.orphans
            why = next((w for j, w in reversed(orphans) if j.name == job.name), "")
            if life.reason != ("Invalid", why):
                life.reason = ("Invalid", why)
                self._out.append(Waiting(job=life.name, code="Invalid", message=why))
            return
        life.in_state = True
        self._tasks[life.name] = {task.name: task for task in info.tasks}

    def _untrack(self, life: JobLife) -> None:
        if life.in_state:
            self.state.remove_job(life.name)
            life.in_state = False
        self._tasks.pop(life.name, None)

    def _forget(self, life: JobLife) -> None:
        """A job in a terminal phase leaves the lifecycle."""
        self._untrack(life)
        life.held.clear()
        self.jobs.pop(life.name, None)

    def _deadline(self, when: float, name: str) -> None:
        self._seq += 1
        heapq.heappush(self._deadlines, (when, self._seq, name))

    def _walltime_deadline(self, life: JobLife) -> float | None:
        limit = life.job.walltime
        if limit is None or life.started_at is None or life.ending is not None:
            return None
        return life.started_at + limit

    def _flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out
