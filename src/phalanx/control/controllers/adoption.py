"""After a restart: which tasks on nodes still have a process, and which are lost.

``recorded`` is the set of ``(job, task)`` whose process record the store holds (and
the executor has been asked to adopt); ``reconcile`` keeps it up to date.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.control.controllers.core import Core
from phalanx.engine.decisions import Evict
from phalanx.engine.lifecycle import TaskEvent, TaskEventKind
from phalanx.engine.snapshot import ON_NODE, TaskStatus
from phalanx.executors.base import Recoverable

#: The message of a task lost because no record of its process was found at start-up.
UNRECORDED = (
    "the server stopped before it recorded the task's process, which may never have started"
)
#: Why a gang restarts whose start a restart of the server cut short.
CUT_SHORT = "a restart of the server cut the gang's start short: some of its tasks never started"


@dataclass(slots=True)
class Reconciled:
    """What the lifecycle must hear after a restart: events per job, and per job the
    Bound tasks no node has a record of (``Lifecycle.unstarted``: never started)."""

    events: dict[str, list[TaskEvent]] = field(default_factory=dict)
    unstarted: dict[str, list[str]] = field(default_factory=dict)


def reconcile(core: Core, recorded: set[tuple[str, str]]) -> Reconciled:
    """What the lifecycle must hear, per job, about its tasks on nodes after a restart.

    A task with no process record in the store is adopted from the record the executor
    left (the server died before storing it); else, when it was still Bound (never
    reported started), it never started (``unstarted``: its gang restarts at no retry's
    cost), and when it had started, it is LOST (and its job retried). A recorded task
    still Bound in the store has a process: it STARTED. A recorded task that was being
    stopped is asked to stop again: the request died with the old server.
    """
    executor = core.executor
    nodes = core.state.snapshot.nodes
    found_out = Reconciled()
    events = found_out.events
    for life in list(core.life.jobs.values()):
        for task in core.life.tasks(life):
            key = (life.name, task.name)
            if task.status not in ON_NODE or task.name in life.held:
                continue  # off its node, or held for ``dependsOn``: it has no process
            node = nodes[task.node].name
            if key not in recorded:
                found = executor.recorded(*key) if isinstance(executor, Recoverable) else None
                # A record older than this attempt's placement is a previous attempt's.
                if found is None and task.status is TaskStatus.BOUND:
                    found_out.unstarted.setdefault(life.name, []).append(task.name)
                    continue
                if found is None or found.start_time < (life.started_at or 0.0) - 1.0:
                    lost = TaskEvent(
                        kind=TaskEventKind.LOST,
                        time=core.now,
                        job=life.name,
                        task=task.name,
                        node=node,
                        message=UNRECORDED,
                    )
                    events.setdefault(life.name, []).append(lost)
                    continue
                assert isinstance(executor, Recoverable)
                executor.adopt([found], now=core.now)
                recorded.add(key)
                core.journal.task(core.rows[life.name].tasks[task.name], process=found.to_dict())
            if task.status is TaskStatus.BOUND:
                started = TaskEvent(
                    kind=TaskEventKind.STARTED,
                    time=core.now,
                    job=life.name,
                    task=task.name,
                    node=node,
                )
                events.setdefault(life.name, []).append(started)
            elif task.status is TaskStatus.RELEASING:
                core.stops.append(
                    Evict(
                        job=life.name,
                        task=task.name,
                        node=node,
                        action="restart",
                        by=life.name,
                        reason="asked to stop before the server restarted",
                    )
                )
    return found_out
