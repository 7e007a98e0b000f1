"""The controller's working state: the one lifecycle, the rows behind it, and the journal.

``Core`` owns the ``Lifecycle`` (the engine's ``ClusterState`` and every live job's
retry bookkeeping), the store ids of each live job and task, the tick's ``Journal``
and the executor. The lifecycle decides; ``record`` writes each effect it returns
into the journal and keeps the executor's requests until the tick is committed, so
memory and store never disagree and no process runs for a placement the store does
not know about.

The accounting ledger (``store.usage``) is written from the same effects: a task's
allocation opens when it is bound (it holds the node's resources from then on) and
closes when it leaves the node (Pending again, Succeeded, Failed, or its job ended),
each at the time the effect carries, never the clock's, so the ledger says what the
lifecycle's records say. A restart changes nothing there: tasks taken back keep their
open allocation; the lifecycle closes those it finds lost, at the time it says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, assert_never

from phalanx.control.store.journal import Journal
from phalanx.domain.job import TaskPhase
from phalanx.domain.node import RECLAIMABLE_LABEL
from phalanx.engine.decisions import Bind, Evict, by_job
from phalanx.engine.lifecycle import (
    BACKOFF,
    MAX_BACKOFF,
    TERMINAL,
    Effect,
    Event,
    JobChanged,
    JobCounters,
    Lifecycle,
    Resized,
    Start,
    Stop,
    TaskChanged,
    Waiting,
)
from phalanx.engine.state import ClusterState
from phalanx.executors.base import Executor

__all__ = ["TERMINAL", "Core", "Rows", "Timing"]

#: The task phases in which a task holds its node, and those in which it has left it.
_ON_NODE = frozenset({TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.RELEASING})
_OFF_NODE = frozenset({TaskPhase.PENDING, TaskPhase.SUCCEEDED, TaskPhase.FAILED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """The controller's time constants, in seconds."""

    period: float = 1.0  # a session at least this often while work waits
    grace: float = 10.0  # SIGTERM to SIGKILL
    backoff: float = BACKOFF  # first retry waits this long; each further retry twice as long
    max_backoff: float = MAX_BACKOFF
    coalesce: float = 0.05  # ticks at most this often: a burst of wake-ups makes one tick


@dataclass(frozen=True, slots=True, kw_only=True)
class Rows:
    """Where one live job is stored: its row id and its tasks' row ids by name."""

    id: int
    tasks: dict[str, int]


class Core:
    """Lifecycle, store ids, journal and executor: one tick's world."""

    def __init__(self, life: Lifecycle, executor: Executor, timing: Timing) -> None:
        self.life = life
        self.executor = executor
        self.timing = timing
        self.rows: dict[str, Rows] = {}
        self.journal = Journal()
        self.now = 0.0
        self.decided = False  # something changed this tick: run a session soon again
        self.starts: list[Bind] = []
        self.stops: list[Evict] = []
        self.ended = 0  # jobs ended so far (the workflow controller watches it)
        #: why tasks are being stopped (the eviction's action), per job: an allocation's end
        self._stopping: dict[str, dict[str, str]] = {}

    @property
    def state(self) -> ClusterState:
        """The engine state the lifecycle keeps."""
        return self.life.state

    def reset(self, life: Lifecycle) -> None:
        """Forget everything in memory (to rebuild it from the store) and use ``life``."""
        self.life = life
        self.rows = {}
        self.journal = Journal()
        self.starts, self.stops = [], []
        self._stopping = {}

    def record(self, effects: Iterable[Effect]) -> None:
        """Journal what the lifecycle did and queue its executor requests for ``dispatch``."""
        ended = []
        for effect in effects:
            self.decided = True
            match effect:
                case JobChanged():
                    values: dict[str, Any] = {
                        "phase": effect.phase.value,
                        "reason": effect.reason,
                        "message": effect.message,
                        "phase_time": effect.time,
                    }
                    if effect.phase in TERMINAL:
                        values["finished_at"] = effect.time
                        ended.append(effect.job)
                    self.journal.job(self.rows[effect.job].id, **values)
                case TaskChanged():
                    rows = self.rows[effect.job]
                    row = rows.tasks.get(effect.task)
                    if row is not None:
                        self.journal.task(row, **_task_columns(effect))
                    else:  # added by a growth in this tick, not inserted yet
                        self.journal.new_task_update(rows.id, effect.task, **_task_columns(effect))
                    self._account(effect, rows.id)
                case Resized():
                    self._resized(effect)
                case JobCounters():
                    self.journal.job(
                        self.rows[effect.job].id,
                        attempts=effect.attempts,
                        preemptions=effect.preemptions,
                        not_before=effect.not_before,
                        started_at=effect.started_at,
                        ending=None if effect.ending is None else effect.ending.value,
                        ending_message=effect.ending_message,
                    )
                case Waiting():
                    self.journal.job(
                        self.rows[effect.job].id, reason=effect.code, message=effect.message
                    )
                case Event():
                    if effect.stops:
                        stopping = self._stopping.setdefault(effect.job, {})
                        stopping.update((stop.task, stop.action) for stop in effect.stops)
                    self.journal.event(
                        self.rows[effect.job].id, effect.time, effect.kind.value, effect.message
                    )
                case Start():
                    self.starts.extend(effect.binds)
                case Stop():
                    self.stops.extend(effect.evictions)
                case _:
                    assert_never(effect)
        self.ended += len(ended)
        for name in ended:
            self.rows.pop(name, None)
            self._stopping.pop(name, None)

    def _account(self, change: TaskChanged, job_id: int) -> None:
        """Open the task's allocation when it is bound; close it when it leaves its node."""
        if change.phase is TaskPhase.BOUND:
            self.journal.allocate(job_id, change.task, **self._allocation(change))
        elif change.phase in _OFF_NODE and change.previous in _ON_NODE:
            action = self._stopping.get(change.job, {}).pop(change.task, None)
            reason = action or change.phase.value
            self.journal.release(job_id, change.task, end=change.time, reason=reason)

    def _resized(self, change: Resized) -> None:
        """Insert the rows of an elastic role's new tasks; delete those of its gone ones."""
        rows = self.rows[change.job]
        prefix = f"{change.job}-{change.role}-"
        for name in change.added:
            index = int(name.removeprefix(prefix))
            self.journal.new_task(
                rows.id, rows.tasks, name=name, role=change.role, index=index, phase="Pending"
            )
        for name in change.removed:
            self.journal.remove_task(rows.id, name, rows.tasks.pop(name, None))
            # a removed task has left its node already; should one not have, it does now
            self.journal.release(rows.id, name, end=change.time, reason="shrink")

    def _allocation(self, change: TaskChanged) -> dict[str, Any]:
        """The ledger's columns of a task bound now: what its role requests, the job's
        user and queue, the node's labels (a report needs no node that may be gone)."""
        job = self.life.jobs[change.job].job
        role = next(r for r in job.roles if r.name == change.role)
        snapshot = self.state.snapshot
        index = snapshot.node_index.get(change.node or "")
        labels = {} if index is None else dict(snapshot.nodes[index].labels)
        return {
            "job": change.job,
            "user": job.user,
            "queue": job.queue,
            "role": change.role,
            "node": change.node or "",
            "resources": dict(role.resources.without_zeros().items()),
            "gpus": list(change.gpus),
            "labels": labels,
            "reclaimable": labels.get(RECLAIMABLE_LABEL) == "true",
            "elastic": role.elastic is not None,
            "start": change.time,
        }

    def dispatch(self) -> list[tuple[list[Bind], Exception]]:
        """Send the tick's start and stop requests to the executor (after the commit).

        Starts go first: a task started and stopped within one tick (a ``dependsOn`` role
        released and then stopped with its gang) is then stopped, not left running. They
        go a job at a time: a start that raises is returned with its error, and the other
        jobs still start."""
        stops, starts, self.stops, self.starts = self.stops, self.starts, [], []
        failed = []
        for binds in by_job(starts).values():
            try:
                self.executor.start(binds, now=self.now)
            except Exception as error:  # one job's bad launch must not stop the others
                failed.append((binds, error))
        if stops:
            self.executor.stop(stops, now=self.now, grace=self.timing.grace)
        return failed


def _task_columns(change: TaskChanged) -> dict[str, Any]:
    """A task row's columns after ``change``."""
    values: dict[str, Any] = {"phase": change.phase.value}
    match change.phase:
        case TaskPhase.BOUND:
            values.update(
                node=change.node, gpus=list(change.gpus), exit_code=None, finished_at=None
            )
        case TaskPhase.RUNNING:
            values["started_at"] = change.time
        case TaskPhase.RELEASING:
            pass
        case TaskPhase.PENDING:
            values.update(
                exit_code=change.exit_code,
                process=None,
                node=None,
                gpus=[],
                started_at=None,
                finished_at=None,
            )
        case TaskPhase.SUCCEEDED | TaskPhase.FAILED:
            values.update(exit_code=change.exit_code, process=None, finished_at=change.time)
        case _:
            assert_never(change.phase)
    return values
