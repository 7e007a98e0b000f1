"""Domain values from stored rows, and the engine state rebuilt from them.

Used at start-up (recovery after a crash included) and when queues change: the engine's
``ClusterState`` fixes its queue tree at construction, so a queue edit rebuilds it from
the tracked jobs' current task states.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from phalanx.control.controllers.core import PHASE_OF_STATUS
from phalanx.control.controllers.tracked import Tracked
from phalanx.control.store.models import JobRow, QueueRow
from phalanx.domain.job import Job, JobPhase, Task, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
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


def tracked_of(row: JobRow) -> Tracked:
    """The controller's view of a stored live job."""
    return Tracked(
        id=row.id,
        job=job_of(row),
        phase=JobPhase(row.phase),
        task_ids={task.name: task.id for task in row.tasks},
        attempts=row.attempts,
        preemptions=row.preemptions,
        not_before=row.not_before,
        started_at=row.started_at,
    )


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


def current_job(state: ClusterState, tracked: Tracked) -> Job:
    """A tracked job as the engine holds it now (phase, task states, attained service)."""
    info = state.job(tracked.name)
    nodes = state.snapshot.nodes
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
        tracked.job,
        phase=tracked.phase,
        pending_since=info.pending_since,
        attained_service=info.attained_service,
        tasks=tasks,
    )


def new_state(
    nodes: Sequence[Node], queues: Sequence[Queue], schedulable: dict[str, bool]
) -> ClusterState:
    """An empty engine state over ``nodes`` and ``queues`` with cordons applied."""
    state = ClusterState(nodes, queues)
    for name, ok in schedulable.items():
        index = state.snapshot.node_index.get(name)
        if index is not None:
            state.snapshot.set_schedulable(index, ok)
    return state
