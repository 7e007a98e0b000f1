"""Domain values from stored rows, and the engine state rebuilt from them.

Used at start-up (recovery after a crash included) and when queues change: the engine's
``ClusterState`` fixes its queue tree at construction, so a queue edit rebuilds it from
the tracked jobs' current task states.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from phalanx.control.controllers.core import Rows
from phalanx.control.store import Session
from phalanx.control.store import usage as stored_usage
from phalanx.control.store.models import JobRow, QueueRow
from phalanx.domain.job import Job, JobPhase, Task, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine.lifecycle import Ending, JobLife
from phalanx.engine.snapshot.usage import DEFAULT_HALF_LIFE, HOUR, KEEP_HOURS
from phalanx.engine.state import ClusterState
from phalanx.spec.job import JobDocument
from phalanx.spec.queue import QueueDocument


def queues_of(rows: Iterable[QueueRow]) -> list[Queue]:
    """The domain queues of stored Queue documents, in name order."""
    return [
        QueueDocument.model_validate(row.document).to_domain()
        for row in sorted(rows, key=lambda r: r.name)
    ]


def job_of(row: JobRow) -> Job:
    """The domain job of a stored row, every task pending (the template of a fresh attempt)."""
    return JobDocument.model_validate(row.document).to_domain(creation_time=row.created_at)


def life_of(row: JobRow) -> tuple[JobLife, Rows]:
    """The lifecycle's record of a stored live job, and where it is stored."""
    life = JobLife(
        job=job_of(row),
        phase=JobPhase(row.phase),
        attempts=row.attempts,
        preemptions=row.preemptions,
        not_before=row.not_before,
        started_at=row.started_at,
        ending=None if row.ending is None else Ending(row.ending),
        ending_message=row.ending_message or "",
    )
    return life, Rows(id=row.id, tasks={task.name: task.id for task in row.tasks})


def stored_tasks(row: JobRow) -> tuple[Task, ...]:
    """The row's tasks as domain tasks, with phase, node, start and GPUs."""
    return tuple(
        Task(
            role=task.role,
            index=task.index,
            phase=TaskPhase(task.phase),
            node=task.node,
            start_time=task.started_at,
            gpus=tuple(task.gpus or ()),
        )
        for task in row.tasks
    )


def new_state(
    nodes: Sequence[Node],
    queues: Sequence[Queue],
    schedulable: dict[str, bool],
    *,
    half_life: float = DEFAULT_HALF_LIFE,
) -> ClusterState:
    """An empty engine state over ``nodes`` and ``queues`` with cordons applied, its
    users' usage decaying at ``half_life``."""
    state = ClusterState(nodes, queues, half_life=half_life)
    for name, ok in schedulable.items():
        index = state.snapshot.node_index.get(name)
        if index is not None:
            state.snapshot.set_schedulable(index, ok)
    return state


def bank_ledger(session: Session, state: ClusterState, now: float) -> int:
    """Bank into ``state``'s usage book every run the accounting ledger holds that still
    counts at ``now`` (ended within ten half-lives, or the longest budget period): what
    fair-share and budgets remember across a restart. Returns how many were banked."""
    book = state.snapshot.usage
    horizon = max(10 * book.half_life, KEEP_HOURS * HOUR)
    runs = stored_usage.ended_after(session, now - horizon)
    for run in runs:
        assert run.end is not None
        rate = state.snapshot.vector(run.resources)
        book.bank((run.queue, run.user), rate, run.start, run.end)
    return len(runs)
