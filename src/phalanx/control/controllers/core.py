"""The controller's working state: the one lifecycle, the rows behind it, and the journal.

``Core`` owns the ``Lifecycle`` (the engine's ``ClusterState`` and every live job's
retry bookkeeping), the store ids of each live job and task, the tick's ``Journal``
and the executor. The lifecycle decides; ``record`` writes each effect it returns
into the journal and keeps the executor's requests until the tick is committed, so
memory and store never disagree and no process runs for a placement the store does
not know about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, assert_never

from phalanx.control.store.journal import Journal
from phalanx.domain.job import TaskPhase
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
