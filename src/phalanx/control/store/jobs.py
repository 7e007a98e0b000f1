"""Jobs and their tasks in the store: every query of ``JobRow`` and ``TaskRow``.

Phases are stored as their values; "active" means not terminal (``lifecycle.TERMINAL``).
Reads return rows or plain tuples; writes go through the session's unit of work (or
``journal`` for the controller's batched ones) and are committed by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.orm import Session, selectinload

from phalanx.control.store.model_versions import PENDING
from phalanx.control.store.models import EventRow, JobRow, TaskRow
from phalanx.domain.job import JobPhase
from phalanx.engine.lifecycle import TERMINAL

#: The stored values of the phases a job may still leave.
ACTIVE: tuple[str, ...] = tuple(p.value for p in JobPhase if p not in TERMINAL)
#: The stored values of the phases a job never leaves.
ENDED: tuple[str, ...] = tuple(p.value for p in TERMINAL)


class NewJob(NamedTuple):
    """A job the API stored that the controller has not taken in yet."""

    id: int
    name: str
    created_at: float
    model_fetch: str | None  # its model inputs: None (none), done, or failed


class JobOutcome(NamedTuple):
    """What a pipeline's step reads of its job."""

    name: str
    phase: str
    reason: str
    message: str
    started_at: float | None
    finished_at: float | None
    preemptions: int


def outcomes(session: Session, names: Iterable[str]) -> dict[str, JobOutcome]:
    """The jobs ``names`` that exist, by name (see ``JobOutcome``)."""
    query = select(
        JobRow.name,
        JobRow.phase,
        JobRow.reason,
        JobRow.message,
        JobRow.started_at,
        JobRow.finished_at,
        JobRow.preemptions,
    ).where(JobRow.name.in_(list(names)))
    return {row.name: JobOutcome(*row) for row in session.execute(query)}


def start_times(session: Session, names: Iterable[str]) -> dict[str, float | None]:
    """When each of the jobs ``names`` that exist started (None: not yet), by name."""
    query = select(JobRow.name, JobRow.started_at).where(JobRow.name.in_(list(names)))
    return {row.name: row.started_at for row in session.execute(query)}


def insert_jobs(session: Session, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Insert job rows (their columns as dicts) in one statement; their ids, in order.
    Raises ``IntegrityError`` when a name is taken (the caller rolls back)."""
    # Core statements on the session's connection: the ORM's bulk path costs twice as much.
    table = JobRow.metadata.tables[JobRow.__tablename__]
    statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
    return list(session.connection().execute(statement, rows).scalars().all())


def insert_tasks(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert task rows (their columns as dicts) in one statement."""
    session.connection().execute(insert(TaskRow.metadata.tables[TaskRow.__tablename__]), rows)


class Waiting(NamedTuple):
    """The waiting jobs of each queue: how many wait for each reason, by (queue,
    reason), and since when the longest has waited, by queue."""

    reasons: dict[tuple[str, str], int]
    since: dict[str, float]


def count_by_queue_and_phase(session: Session) -> dict[tuple[str, str], int]:
    """How many jobs each (queue, phase) holds."""
    query = select(JobRow.queue, JobRow.phase, func.count()).group_by(JobRow.queue, JobRow.phase)
    return {(queue, phase): count for queue, phase, count in session.execute(query)}


def waiting_by_queue(session: Session, phases: Sequence[str]) -> Waiting:
    """The jobs in ``phases`` (those that wait), per queue (see ``Waiting``)."""
    waiting = JobRow.phase.in_(list(phases))
    reasons = select(JobRow.queue, JobRow.reason, func.count()).where(waiting)
    since = select(JobRow.queue, func.min(JobRow.phase_time)).where(waiting)
    return Waiting(
        reasons={
            (queue, reason): count
            for queue, reason, count in session.execute(
                reasons.group_by(JobRow.queue, JobRow.reason)
            )
        },
        since={row[0]: row[1] for row in session.execute(since.group_by(JobRow.queue))},
    )


def page(
    session: Session,
    *,
    limit: int,
    newest: bool = False,
    user: str | None = None,
    queue: str | None = None,
    phases: Sequence[str] = (),
    after: int | None = None,
) -> Sequence[JobRow]:
    """Up to ``limit`` jobs in id order (``newest``: newest first), past id ``after``
    when given; of ``user`` and ``queue`` alone, and in ``phases``, when given."""
    query = select(JobRow).order_by(JobRow.id.desc() if newest else JobRow.id).limit(limit)
    if user is not None:
        query = query.where(JobRow.user == user)
    if queue is not None:
        query = query.where(JobRow.queue == queue)
    if phases:
        query = query.where(JobRow.phase.in_(list(phases)))
    if after is not None:
        query = query.where(JobRow.id < after if newest else JobRow.id > after)
    return session.scalars(query).all()


def tasks(
    session: Session,
    job_id: int,
    *,
    limit: int | None = None,
    phases: Sequence[str] = (),
    after: int | None = None,
) -> Sequence[TaskRow]:
    """Job ``job_id``'s tasks in order (role by role, replica by replica): at most
    ``limit``, past task id ``after``, and in ``phases``, when given."""
    query = select(TaskRow).where(TaskRow.job_id == job_id).order_by(TaskRow.id).limit(limit)
    if phases:
        query = query.where(TaskRow.phase.in_(list(phases)))
    if after is not None:
        query = query.where(TaskRow.id > after)
    return session.scalars(query).all()


def task_starts(
    session: Session, job_id: int, *, name: str | None = None, limit: int | None = None
) -> list[tuple[str, float | None]]:
    """(name, start of its current run or None) of job ``job_id``'s tasks in order (at
    most ``limit``); with ``name``, that one alone if the job has it."""
    query = (
        select(TaskRow.name, TaskRow.started_at)
        .where(TaskRow.job_id == job_id)
        .order_by(TaskRow.id)
    )
    if name is not None:
        query = query.where(TaskRow.name == name)
    return [(task, started) for task, started in session.execute(query.limit(limit))]


def task_counts(session: Session, job_ids: Sequence[int]) -> list[tuple[int, str, str, int]]:
    """(job id, role, phase, tasks) for the jobs ``job_ids``."""
    query = (
        select(TaskRow.job_id, TaskRow.role, TaskRow.phase, func.count())
        .where(TaskRow.job_id.in_(list(job_ids)))
        .group_by(TaskRow.job_id, TaskRow.role, TaskRow.phase)
    )
    return [(job_id, role, phase, count) for job_id, role, phase, count in session.execute(query)]


def task_nodes(
    session: Session, job_ids: Sequence[int], phases: Sequence[str]
) -> list[tuple[int, str]]:
    """(job id, node) for each node a task in ``phases`` of the jobs ``job_ids`` is on."""
    query = (
        select(TaskRow.job_id, TaskRow.node)
        .where(
            TaskRow.job_id.in_(list(job_ids)),
            TaskRow.phase.in_(list(phases)),
            TaskRow.node.is_not(None),
        )
        .distinct()
    )
    return [(job_id, node) for job_id, node in session.execute(query) if node is not None]


def count_by_phase(session: Session, queue: str) -> dict[str, int]:
    """How many jobs of ``queue`` each phase holds."""
    query = select(JobRow.phase, func.count()).where(JobRow.queue == queue)
    return {row[0]: row[1] for row in session.execute(query.group_by(JobRow.phase))}


def waiting_per_user(
    session: Session, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """How many jobs of each (queue, user) of ``keys`` wait: submitted, not running yet
    and not ended (Pending or Queued). Keys without such jobs are absent."""
    wanted = set(keys)
    if not wanted:
        return {}
    query = (
        select(JobRow.queue, JobRow.user, func.count())
        .where(
            JobRow.queue.in_(sorted({queue for queue, _ in wanted})),
            JobRow.user.in_(sorted({user for _, user in wanted})),
            JobRow.phase.in_([JobPhase.PENDING.value, JobPhase.QUEUED.value]),
        )
        .group_by(JobRow.queue, JobRow.user)
    )
    return {
        (queue, user): count
        for queue, user, count in session.execute(query)
        if (queue, user) in wanted
    }


def count_active(session: Session, queue: str) -> int:
    """How many jobs of ``queue`` have not ended."""
    query = select(func.count()).where(JobRow.queue == queue, JobRow.phase.not_in(ENDED))
    return int(session.scalar(query) or 0)


def placed_tasks(session: Session, user: str, node: str | None = None) -> set[tuple[str, str]]:
    """(node, task name) of each task of ``user``'s active jobs that is on a node (on
    ``node`` alone, when given)."""
    query = (
        select(TaskRow.node, TaskRow.name)
        .join(JobRow, TaskRow.job_id == JobRow.id)
        .where(
            JobRow.user == user,
            JobRow.phase.not_in(ENDED),
            TaskRow.node.is_not(None) if node is None else TaskRow.node == node,
        )
    )
    return {(str(on), name) for on, name in session.execute(query)}


def by_name(session: Session, name: str) -> JobRow | None:
    """The job called ``name``, if any."""
    return session.scalar(select(JobRow).where(JobRow.name == name))


def owner(session: Session, name: str) -> str | None:
    """The user who submitted job ``name``; None when there is no such job."""
    return session.scalar(select(JobRow.user).where(JobRow.name == name))


def owner_and_document(session: Session, name: str) -> tuple[str, dict[str, Any]] | None:
    """Job ``name``'s user and stored document; None when there is no such job."""
    found = session.execute(select(JobRow.user, JobRow.document).where(JobRow.name == name)).first()
    return None if found is None else (found[0], found[1])


def active_with_tasks(session: Session) -> Sequence[JobRow]:
    """Every taken-in job still active, oldest first, with its tasks loaded."""
    return session.scalars(
        select(JobRow)
        .where(JobRow.ingested.is_(True), JobRow.phase.in_(ACTIVE))
        .order_by(JobRow.id)
        .options(selectinload(JobRow.tasks))
    ).all()


def not_ingested(session: Session, limit: int) -> list[NewJob]:
    """Up to ``limit`` jobs not taken in by the controller yet, oldest first (plain
    column reads: a new job's other columns still hold their defaults). A job whose
    model inputs are still being copied out (``model_fetch`` pending) waits."""
    rows = session.execute(
        select(JobRow.id, JobRow.name, JobRow.created_at, JobRow.model_fetch)
        .where(
            JobRow.ingested.is_(False),
            or_(JobRow.model_fetch.is_(None), JobRow.model_fetch != PENDING),
        )
        .order_by(JobRow.id)
        .limit(limit)
    )
    return [NewJob(*row) for row in rows]


def documents(session: Session, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The stored documents of the jobs ``ids``, by id."""
    query = select(JobRow.id, JobRow.document).where(JobRow.id.in_(list(ids)))
    return {row.id: row.document for row in session.execute(query)}


def set_document(session: Session, job_id: int, document: dict[str, Any]) -> None:
    """Replace job ``job_id``'s stored document (its inputs pinned before it is taken in)."""
    session.execute(update(JobRow).where(JobRow.id == job_id).values(document=document))


def task_ids(session: Session, first: int, last: int) -> dict[int, dict[str, int]]:
    """The task row ids of the jobs with ids from ``first`` to ``last``: job id ->
    task name -> task id."""
    found: dict[int, dict[str, int]] = {}
    for task_id, name, job_id in session.execute(
        select(TaskRow.id, TaskRow.name, TaskRow.job_id).where(TaskRow.job_id.between(first, last))
    ):
        found.setdefault(job_id, {})[name] = task_id
    return found


def cancel_requested(session: Session) -> Sequence[str]:
    """The names of the active jobs whose cancel was asked for."""
    return session.scalars(
        select(JobRow.name).where(JobRow.cancel_requested.is_(True), JobRow.phase.in_(ACTIVE))
    ).all()


def scale_requested(session: Session) -> list[tuple[int, str, dict[str, Any]]]:
    """(id, name, document) of each active job whose owner asked for a new size."""
    rows = session.execute(
        select(JobRow.id, JobRow.name, JobRow.document).where(
            JobRow.scale_requested.is_(True), JobRow.phase.in_(ACTIVE)
        )
    )
    return [(row_id, name, document) for row_id, name, document in rows]


def request_cancel(session: Session, names: Iterable[str], *, delete: bool = False) -> int:
    """Ask the controller to cancel the jobs ``names`` that have not ended (and, with
    ``delete``, to delete them once ended). How many jobs were asked (0: all ended)."""
    flags = {"cancel_requested": True, **({"delete_requested": True} if delete else {})}
    marked = session.execute(
        update(JobRow)
        .where(JobRow.name.in_(list(names)), JobRow.phase.not_in(ENDED))
        .values(**flags),
        execution_options={"synchronize_session": False},
    )
    return int(marked.rowcount)  # type: ignore[attr-defined]


def events(session: Session, job_id: int) -> Sequence[EventRow]:
    """The events of job ``job_id``, oldest first."""
    return session.scalars(
        select(EventRow).where(EventRow.job_id == job_id).order_by(EventRow.id)
    ).all()


def add_event(session: Session, job_id: int, *, time: float, kind: str, message: str) -> None:
    """Record an event of job ``job_id`` outside a controller tick."""
    session.execute(insert(EventRow).values(job_id=job_id, time=time, kind=kind, message=message))
