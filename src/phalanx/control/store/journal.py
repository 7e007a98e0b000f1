"""What one tick changed, written to the store in one transaction.

The controller keeps the truth in memory while it works; the journal collects the
row updates, events and accounting allocations of a tick and ``flush`` writes them
together, so a crash leaves the store at the end of the previous tick, never half-way
through one (the ledger included: ``phalanx.control.store.usage``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import delete, insert, update
from sqlalchemy.orm import Session

from phalanx.control.store import usage
from phalanx.control.store.models import EventRow, JobRow, TaskRow
from phalanx.domain.job import JobPhase

_ENDED = frozenset({JobPhase.SUCCEEDED.value, JobPhase.FAILED.value, JobPhase.CANCELLED.value})


class Journal:
    """Pending updates of job rows, task rows and new events."""

    def __init__(self) -> None:
        self._jobs: dict[int, dict[str, Any]] = defaultdict(dict)
        self._tasks: dict[int, dict[str, Any]] = defaultdict(dict)
        self._events: list[dict[str, Any]] = []
        self._ended: set[int] = set()
        #: tasks added to live jobs (an elastic role grew): their columns, and the
        #: name -> row id map to fill once they are inserted
        self._new_tasks: dict[tuple[int, str], tuple[dict[str, Any], dict[str, int]]] = {}
        self._gone_tasks: list[int] = []
        #: allocations opened in this tick (by job row and task: the latest), in order
        self._opened: list[dict[str, Any]] = []
        self._latest: dict[tuple[int, str], dict[str, Any]] = {}
        #: allocations of earlier ticks closed in this one: (job row, task, end, reason)
        self._closed: list[tuple[int, str, float, str]] = []
        self._job_closed: dict[int, tuple[float, str]] = {}  # jobs ended: what stays open

    def job(self, job_id: int, **values: Any) -> None:
        """Set columns of job ``job_id`` (later values of a column win). A job that ends
        here is deleted by ``flush`` if it was deleted while live (``delete_requested``)."""
        self._jobs[job_id].update(values)
        if values.get("phase") in _ENDED:
            self._ended.add(job_id)
            end = float(values.get("phase_time") or values.get("finished_at") or 0.0)
            self._job_closed[job_id] = (end, f"job {values['phase']}")
            for (job, _task), opened in self._latest.items():
                if job == job_id and opened["end"] is None:
                    opened.update(end=end, ended_by=f"job {values['phase']}")

    def task(self, task_id: int, **values: Any) -> None:
        """Set columns of task ``task_id`` (later values of a column win)."""
        self._tasks[task_id].update(values)

    def new_task(self, job_id: int, ids: dict[str, int], **values: Any) -> None:
        """Insert a task row of job ``job_id`` (``values`` has its name); ``flush`` adds its
        id to ``ids`` under its name. Updates before then go to ``new_task_update``."""
        self._new_tasks[(job_id, values["name"])] = ({"job_id": job_id, **values}, ids)

    def new_task_update(self, job_id: int, name: str, **values: Any) -> bool:
        """Set columns of a task added in this tick; False when there is none."""
        added = self._new_tasks.get((job_id, name))
        if added is not None:
            added[0].update(values)
        return added is not None

    def remove_task(self, job_id: int, name: str, task_id: int | None) -> None:
        """Delete task ``name`` of job ``job_id`` (``task_id``: its row, if it has one yet)."""
        if self._new_tasks.pop((job_id, name), None) is None and task_id is not None:
            self._gone_tasks.append(task_id)
            self._tasks.pop(task_id, None)

    def allocate(self, job_id: int, task: str, **values: Any) -> None:
        """Open an allocation of task ``task`` of job row ``job_id`` (``values``: the
        other ``AllocationRow`` columns, ``start`` among them)."""
        opened = {"job_id": job_id, "task": task, **values, "end": None, "ended_by": ""}
        self._opened.append(opened)
        self._latest[(job_id, task)] = opened

    def release(self, job_id: int, task: str, *, end: float, reason: str) -> None:
        """Close the open allocation of task ``task`` of job row ``job_id`` at ``end``."""
        opened = self._latest.get((job_id, task))
        if opened is not None and opened["end"] is None:
            opened.update(end=end, ended_by=reason)
        elif opened is None:
            self._closed.append((job_id, task, end, reason))

    def event(self, job_id: int, time: float, kind: str, message: str) -> None:
        """Record an event of job ``job_id``."""
        self._events.append({"job_id": job_id, "time": time, "kind": kind, "message": message})

    def __bool__(self) -> bool:
        return bool(
            self._jobs
            or self._tasks
            or self._events
            or self._new_tasks
            or self._gone_tasks
            or self._opened
            or self._closed
            or self._job_closed
        )

    def flush(self, session: Session) -> None:
        """Write everything collected into ``session`` (the caller commits) and start empty."""
        for model, rows in ((JobRow, self._jobs), (TaskRow, self._tasks)):
            # Rows with the same set of columns go in one executemany.
            groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
            for row_id, values in rows.items():
                groups[tuple(sorted(values))].append({"id": row_id, **values})
            for batch in groups.values():
                session.execute(update(model), batch)
        if self._gone_tasks:
            session.execute(
                delete(TaskRow).where(TaskRow.id.in_(self._gone_tasks)),
                execution_options={"synchronize_session": False},
            )
            self._gone_tasks = []
        for values, ids in self._new_tasks.values():
            ids[values["name"]] = session.execute(
                insert(TaskRow).values(**values).returning(TaskRow.id)
            ).scalar_one()
        self._new_tasks.clear()
        if self._events:
            session.execute(insert(EventRow), self._events)
        self._flush_ledger(session)
        if self._ended:  # deleted while live: gone with the tick that ends them
            deleted = JobRow.id.in_(sorted(self._ended)) & JobRow.delete_requested.is_(True)
            session.execute(
                delete(JobRow).where(deleted), execution_options={"synchronize_session": False}
            )
            self._ended.clear()
        self._jobs.clear()
        self._tasks.clear()
        self._events = []

    def _flush_ledger(self, session: Session) -> None:
        """Close what earlier ticks opened, then insert what this one opened (a task
        that left its node and was bound again in one tick has one of each)."""
        for job_id, task, end, reason in self._closed:
            usage.close(session, job_id, task, end=end, reason=reason)
        for job_id, (end, reason) in self._job_closed.items():
            usage.close_job(session, job_id, end=end, reason=reason)
        usage.open_many(session, self._opened)
        self._opened, self._closed = [], []
        self._latest.clear()
        self._job_closed.clear()
