"""After a restart: which tasks on nodes still have a process, and which are lost.

``recorded`` is the set of ``(job, task)`` whose process record the store holds (and
the executor has been asked to adopt); both functions keep it up to date.
"""

from __future__ import annotations

from phalanx.control.controllers import lifecycle
from phalanx.control.controllers.core import Core
from phalanx.domain.job import TaskPhase
from phalanx.engine.snapshot import ON_NODE, TaskStatus
from phalanx.executors.base import Recoverable, TaskEvent, TaskEventKind

#: The message of a task lost because no record of its process was found at start-up.
UNRECORDED = (
    "the server stopped before it recorded the task's process, which may never have started"
)


def lose_unrecorded(core: Core, recorded: set[tuple[str, str]]) -> None:
    """Tasks on a node with no process record in the store: adopted from the record the
    executor left (the server died before storing it), or else lost: the task fails and
    its job retries or fails by its rules (``lifecycle.on_event``), with ``UNRECORDED``
    in the job's message."""
    executor = core.executor
    for tracked in list(core.jobs.values()):
        for task in core.tasks(tracked):
            key = (tracked.name, task.name)
            if task.status not in ON_NODE or key in recorded:
                continue
            found = executor.recorded(*key) if isinstance(executor, Recoverable) else None
            # A record older than this attempt's placement is a previous attempt's.
            if found is not None and found.start_time >= (tracked.started_at or 0.0) - 1.0:
                assert isinstance(executor, Recoverable)
                executor.adopt([found], now=core.now)
                recorded.add(key)
                core.journal.task(tracked.task_ids[task.name], process=found.to_dict())
                continue
            node = core.state.snapshot.nodes[task.node].name
            lost = TaskEvent(
                kind=TaskEventKind.LOST,
                time=core.now,
                job=tracked.name,
                task=task.name,
                node=node,
                message=UNRECORDED,
            )
            lifecycle.on_event(core, lost)


def mark_adopted_running(core: Core, recorded: set[tuple[str, str]]) -> None:
    """A recorded task still Bound in the store has a process: it is Running."""
    for tracked in core.jobs.values():
        for task in core.tasks(tracked):
            if task.status is TaskStatus.BOUND and (tracked.name, task.name) in recorded:
                core.set_task(task, TaskPhase.RUNNING)
