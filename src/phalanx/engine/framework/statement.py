"""Tentative allocate / pipeline / evict operations, committed or discarded as a whole.

``discard`` undoes every operation in reverse order and restores the snapshot, the
job and queue counters and the plugins' state (through on_allocate/on_deallocate)
exactly. Used as a context manager, a statement that was neither committed nor
kept is discarded on exit: that is gang all-or-nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import TYPE_CHECKING

from phalanx.domain.errors import EngineInvariantError
from phalanx.engine.snapshot import EVICTABLE, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from phalanx.engine.framework.session import Session


class OpKind(Enum):
    """The three tentative operations."""

    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One applied operation and what undoing it needs."""

    kind: OpKind
    task: TaskInfo
    node: int
    previous: TaskStatus
    action: str = ""
    by: str = ""
    reason: str = ""


class Statement:
    """A group of operations applied to the session at once, undone at once."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.operations: list[Operation] = []
        self._closed = False

    def allocate(self, task: TaskInfo, node: int) -> None:
        """Place a pending task on ``node`` (which must have room now)."""
        self._require(task, TaskStatus.PENDING)
        self._session.apply_allocate(task, node, TaskStatus.ALLOCATED)
        self.operations.append(
            Operation(kind=OpKind.ALLOCATE, task=task, node=node, previous=TaskStatus.PENDING)
        )

    def pipeline(self, task: TaskInfo, node: int) -> None:
        """Promise ``node``'s resources being released to a pending task."""
        self._require(task, TaskStatus.PENDING)
        self._session.apply_allocate(task, node, TaskStatus.PIPELINED)
        self.operations.append(
            Operation(kind=OpKind.PIPELINE, task=task, node=node, previous=TaskStatus.PENDING)
        )

    def evict(self, task: TaskInfo, *, action: str, by: str, reason: str) -> None:
        """Start releasing a bound or running task's resources."""
        if task.status not in EVICTABLE:
            raise EngineInvariantError(f"cannot evict {task.name} in status {task.status.name}")
        previous = task.status
        self._session.apply_evict(task)
        self.operations.append(
            Operation(
                kind=OpKind.EVICT,
                task=task,
                node=task.node,
                previous=previous,
                action=action,
                by=by,
                reason=reason,
            )
        )

    def commit(self) -> None:
        """Make the operations part of the session's result."""
        self._close()
        self._session.record(self.operations)

    def keep(self) -> None:
        """Keep the operations' effect in the session without dispatching them (pipelined gangs)."""
        self._close()
        self._session.record(self.operations, dispatch=False)

    def discard(self) -> None:
        """Undo every operation, newest first."""
        self._close()
        self.rollback(0)

    def savepoint(self) -> int:
        """A mark to ``rollback`` to: the operations made so far stay."""
        return len(self.operations)

    def rollback(self, savepoint: int) -> None:
        """Undo the operations made since ``savepoint``, newest first, exactly as
        ``discard`` would; the statement stays open."""
        for op in reversed(self.operations[savepoint:]):
            if op.kind is OpKind.EVICT:
                self._session.undo_evict(op.task, op.previous)
            else:
                self._session.undo_allocate(op.task)
        del self.operations[savepoint:]

    def _close(self) -> None:
        if self._closed:
            raise EngineInvariantError("a statement is committed, kept or discarded once")
        self._closed = True

    def _require(self, task: TaskInfo, status: TaskStatus) -> None:
        if task.status is not status:
            raise EngineInvariantError(f"{task.name} is {task.status.name}, expected {status.name}")

    def __enter__(self) -> Statement:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._closed:
            self.discard()
