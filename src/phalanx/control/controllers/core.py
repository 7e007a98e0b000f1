"""The controller's working state and the primitives every part of it uses.

``Core`` owns the engine's ``ClusterState`` (the scheduler's incrementally maintained
snapshot), the tracked jobs, the tick's ``Journal`` and the executor. Every change of a
task's phase goes through ``Core.set_task`` and every change of a job's phase through
``Core.set_phase``: each checks the lifecycle table, updates the engine's state and
journals the row with a reason and time, so memory and store never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from phalanx.control.controllers.journal import Journal
from phalanx.control.controllers.tracked import Tracked
from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.domain.lifecycle import check_job_transition, check_task_transition
from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.snapshot import ON_NODE, TaskInfo, TaskStatus
from phalanx.engine.state import ClusterState
from phalanx.executors.base import Executor

#: The lifecycle phase of each engine status a stored task can have.
PHASE_OF_STATUS = {
    TaskStatus.PENDING: TaskPhase.PENDING,
    TaskStatus.BOUND: TaskPhase.BOUND,
    TaskStatus.RUNNING: TaskPhase.RUNNING,
    TaskStatus.RELEASING: TaskPhase.RELEASING,
    TaskStatus.SUCCEEDED: TaskPhase.SUCCEEDED,
    TaskStatus.FAILED: TaskPhase.FAILED,
}

TERMINAL = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """The controller's time constants, in seconds."""

    period: float = 1.0  # a session at least this often while work waits
    grace: float = 10.0  # SIGTERM to SIGKILL
    backoff: float = 10.0  # first retry waits this long; each further retry twice as long
    max_backoff: float = 300.0
    coalesce: float = 0.05  # ticks at most this often: a burst of wake-ups makes one tick


class Core:
    """Engine state, tracked jobs, journal and executor: one tick's world."""

    def __init__(self, state: ClusterState, executor: Executor, timing: Timing) -> None:
        self.state = state
        self.executor = executor
        self.timing = timing
        self.jobs: dict[str, Tracked] = {}
        self.journal = Journal()
        self.now = 0.0
        self.decided = False  # something changed this tick: run a session soon again
        # Executor requests wait until the tick's journal is committed: a process never
        # runs for a placement the store does not know about.
        self.starts: list[Bind] = []
        self.stops: list[Evict] = []

    def reset(self, state: ClusterState) -> None:
        """Forget everything in memory (to rebuild it from the store) and use ``state``."""
        self.state = state
        self.jobs = {}
        self.journal = Journal()
        self.starts, self.stops = [], []

    # -- phases ---------------------------------------------------------------------------

    def set_phase(self, job: Tracked, phase: JobPhase, reason: str, message: str) -> None:
        """Move ``job`` to ``phase`` with a reason; journals the row and an event."""
        if phase is job.phase:
            return
        check_job_transition(job.phase, phase)
        job.phase = phase
        values: dict[str, Any] = {
            "phase": phase.value,
            "reason": reason,
            "message": message,
            "phase_time": self.now,
        }
        if phase in TERMINAL:
            values["finished_at"] = self.now
        self.journal.job(job.id, **values)
        self.journal.event(job.id, self.now, phase.value, message or reason)
        if job.in_state:
            self.state.set_phase(
                job.name, phase, pending_since=self.now if phase is JobPhase.PENDING else None
            )
        self.decided = True

    def set_task(
        self,
        task: TaskInfo,
        phase: TaskPhase,
        *,
        node: str | None = None,
        gpus: tuple[int, ...] = (),
        exit_code: int | None = None,
        at: float | None = None,
    ) -> None:
        """Move one task to ``phase``; journals its row (node and GPUs while it holds one).
        ``at`` is when it happened, if the reporter knows better than the tick's ``now``."""
        when = self.now if at is None else at
        job = self.jobs[task.job.name]
        current = PHASE_OF_STATUS[task.status]
        if current is not phase:
            check_task_transition(current, phase)
        values: dict[str, Any] = {"phase": phase.value}
        if phase is TaskPhase.BOUND:
            self.state.set_task(task, phase, node, start_time=self.now, gpus=gpus)
            values.update(node=node, gpus=list(gpus), exit_code=None, finished_at=None)
        elif phase is TaskPhase.RUNNING:
            self.state.set_task(task, phase, self.state.snapshot.nodes[task.node].name)
            values["started_at"] = when
        elif phase is TaskPhase.RELEASING:
            self.state.set_task(task, phase, self.state.snapshot.nodes[task.node].name)
        else:
            self.state.set_task(task, phase, now=self.now)
            values.update(exit_code=exit_code, process=None)
            if phase is TaskPhase.PENDING:
                values.update(node=None, gpus=[], started_at=None, finished_at=None)
            else:
                values["finished_at"] = when
        self.journal.task(job.task_ids[task.name], **values)
        self.decided = True

    # -- stopping -------------------------------------------------------------------------

    def stop(self, tasks: Iterable[TaskInfo], *, action: str, by: str, reason: str) -> None:
        """Ask the executor to stop ``tasks`` (those on a node); each becomes Releasing."""
        stops = []
        for task in tasks:
            if task.status not in ON_NODE or task.status is TaskStatus.RELEASING:
                continue
            node = self.state.snapshot.nodes[task.node].name
            self.set_task(task, TaskPhase.RELEASING)
            self.jobs[task.job.name].held.pop(task.name, None)
            stops.append(
                Evict(
                    job=task.job.name,
                    task=task.name,
                    node=node,
                    action=action,
                    by=by,
                    reason=reason,
                )
            )
        self.stops.extend(stops)

    def start(self, binds: Iterable[Bind]) -> None:
        """Ask the executor to start ``binds`` once the tick is committed."""
        self.starts.extend(binds)

    def dispatch(self) -> None:
        """Send the tick's stop and start requests to the executor (after the commit)."""
        stops, starts, self.stops, self.starts = self.stops, self.starts, [], []
        if stops:
            self.executor.stop(stops, now=self.now, grace=self.timing.grace)
        if starts:
            self.executor.start(starts, now=self.now)

    def tasks(self, job: Tracked) -> list[TaskInfo]:
        """The job's tasks in the engine's state (empty while it waits outside it)."""
        return self.state.job(job.name).tasks if job.in_state else []
