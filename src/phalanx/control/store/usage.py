"""The accounting ledger in the store: every query of ``AllocationRow``.

An allocation is opened when the lifecycle binds a task to a node and closed when the
task leaves it, at the times the lifecycle gave (``phalanx.control.controllers.core``
writes both through the tick's ``Journal``, in the tick's transaction): the ledger
holds what the lifecycle's records hold, across restarts of the server. A task holds at
most one open allocation at a time, so ``(job_id, task)`` names the open one. Rows are
never deleted with their job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, or_, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import AllocationRow


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """One placement of one task as the ledger holds it (``end`` None: still held).
    ``resources`` are the role's requests in canonical units (millicores, bytes, devices)."""

    id: int
    job: str
    user: str
    queue: str
    task: str
    role: str
    node: str
    resources: Mapping[str, float]
    gpus: tuple[int, ...]
    labels: Mapping[str, str]
    reclaimable: bool
    elastic: bool
    start: float
    end: float | None
    ended_by: str


def _value(row: AllocationRow) -> Allocation:
    return Allocation(
        id=row.id,
        job=row.job,
        user=row.user,
        queue=row.queue,
        task=row.task,
        role=row.role,
        node=row.node,
        resources=dict(row.resources or {}),
        gpus=tuple(row.gpus or ()),
        labels=dict(row.labels or {}),
        reclaimable=bool(row.reclaimable),
        elastic=bool(row.elastic),
        start=row.start,
        end=row.end,
        ended_by=row.ended_by or "",
    )


def open_many(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert allocations (each a dict of ``AllocationRow`` columns; ``end`` may be set
    already when the task left its node in the tick that placed it)."""
    if rows:
        session.execute(insert(AllocationRow), [{"end": None, "ended_by": "", **r} for r in rows])


def close(session: Session, job_id: int, task: str, *, end: float, reason: str) -> None:
    """Close task ``task`` of job row ``job_id``'s open allocation (none: nothing)."""
    session.execute(
        update(AllocationRow)
        .where(
            AllocationRow.job_id == job_id,
            AllocationRow.task == task,
            AllocationRow.end.is_(None),
        )
        .values(end=end, ended_by=reason[:32])
        .execution_options(synchronize_session=False)
    )


def close_job(session: Session, job_id: int, *, end: float, reason: str) -> None:
    """Close every allocation of job row ``job_id`` still open (its job ended)."""
    session.execute(
        update(AllocationRow)
        .where(AllocationRow.job_id == job_id, AllocationRow.end.is_(None))
        .values(end=end, ended_by=reason[:32])
        .execution_options(synchronize_session=False)
    )


def overlapping(
    session: Session,
    *,
    since: float | None = None,
    until: float | None = None,
    user: str | None = None,
    queue: str | None = None,
    job: str | None = None,
) -> list[Allocation]:
    """Allocations held for some time within ``[since, until)`` (None: unbounded),
    filtered by ``user``, ``queue`` and ``job`` when given; by start, then id."""
    query = select(AllocationRow).order_by(AllocationRow.start, AllocationRow.id)
    if until is not None:
        query = query.where(AllocationRow.start < until)
    if since is not None:
        query = query.where(or_(AllocationRow.end.is_(None), AllocationRow.end > since))
    for column, wanted in (
        (AllocationRow.user, user),
        (AllocationRow.queue, queue),
        (AllocationRow.job, job),
    ):
        if wanted is not None:
            query = query.where(column == wanted)
    return [_value(row) for row in session.scalars(query)]


def ended_after(session: Session, after: float) -> list[Allocation]:
    """Closed allocations that ended after ``after``, by end, then id: what a usage
    book restarting at some time needs back (user, queue, resources, start and end)."""
    query = (
        select(AllocationRow)
        .where(AllocationRow.end.is_not(None), AllocationRow.end > after)
        .order_by(AllocationRow.end, AllocationRow.id)
    )
    return [_value(row) for row in session.scalars(query)]
