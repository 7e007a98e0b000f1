"""``/api/v1/jobs``: submit, list, get, cancel, events, logs and "why pending"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from phalanx.control.api.deps import ApiError, Caller, DbSession, TheController
from phalanx.control.api.logs import JobLiveness, prefixed_follow, prefixed_tail
from phalanx.control.api.logs import follow as follow_log
from phalanx.control.api.logs import tail as read_tail
from phalanx.control.auth import Principal
from phalanx.control.batcher import SubmissionWriter
from phalanx.control.controllers.controller import Intent
from phalanx.control.controllers.core import TERMINAL
from phalanx.control.schemas.views import EventView, JobPage, JobView, TaskView, WhyView
from phalanx.control.store.models import EventRow, JobRow
from phalanx.control.submit import parse_job, requested
from phalanx.domain.job import JobPhase
from phalanx.executors.base import LogStream, TaskLog

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

_TERMINAL = [p.value for p in TERMINAL]


@router.post("", status_code=201, response_model=JobView)
async def submit(
    document: Annotated[
        dict[str, Any], Body(description="a Job document: phalanx, Volcano or OpenPAI form")
    ],
    caller: Caller,
    request: Request,
    controller: TheController,
) -> Response:
    """Submit a job. It starts Pending; the scheduler takes it from there. The answer
    comes once the job is stored."""
    job = parse_job(document, caller)  # CPU only: on the event loop, no thread hop
    writer: SubmissionWriter = request.app.state.submissions
    view = await writer.submit(job, caller)
    controller.wake(Intent.JOBS)
    # The view is built here, valid by construction: skip FastAPI's second validation.
    return Response(view.model_dump_json(), status_code=201, media_type="application/json")


@router.get("", response_model=JobPage)
def list_jobs(
    caller: Caller,
    session: DbSession,
    queue: str | None = None,
    phase: Annotated[list[JobPhase] | None, Query()] = None,
    user: str | None = None,
    after: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="the 'next' of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JobPage:
    """Jobs, oldest first, a page at a time. Users see their own jobs; admins see all."""
    query = select(JobRow).order_by(JobRow.id).limit(limit + 1)
    if not caller.is_admin:
        query = query.where(JobRow.user == caller.name)
    elif user is not None:
        query = query.where(JobRow.user == user)
    if queue is not None:
        query = query.where(JobRow.queue == queue)
    if phase:
        query = query.where(JobRow.phase.in_([p.value for p in phase]))
    if after is not None:
        query = query.where(JobRow.id > after)
    rows = session.scalars(query.options(selectinload(JobRow.tasks))).all()
    more = len(rows) > limit
    rows = rows[:limit]
    return JobPage(
        items=[job_view(row, with_tasks=True) for row in rows],
        next=rows[-1].id if more and rows else None,
    )


@router.get("/{name}", response_model=JobView)
def get_job(name: str, caller: Caller, session: DbSession) -> JobView:
    """One job with its tasks and its document."""
    return job_view(_visible(session, name, caller), with_tasks=True, with_document=True)


@router.post("/{name}/cancel", response_model=JobView)
def cancel_job(name: str, caller: Caller, session: DbSession, controller: TheController) -> JobView:
    """Ask for the job to be cancelled: its tasks are stopped, then it is Cancelled."""
    row = _visible(session, name, caller)
    if row.phase not in _TERMINAL:
        row.cancel_requested = True
        session.commit()
        controller.wake(Intent.CANCELS)
    return job_view(row, with_tasks=True)


@router.delete("/{name}", response_model=JobView)
def delete_job(name: str, caller: Caller, session: DbSession, controller: TheController) -> JobView:
    """Cancel a live job; remove a finished one (with its tasks and events)."""
    row = _visible(session, name, caller)
    view = job_view(row, with_tasks=True)
    if row.phase in _TERMINAL:
        session.delete(row)
    else:
        row.cancel_requested = True
        view.cancel_requested = True
    session.commit()
    controller.wake(Intent.CANCELS)
    return view


@router.get("/{name}/events", response_model=list[EventView])
def job_events(name: str, caller: Caller, session: DbSession) -> list[EventView]:
    """What happened to the job, oldest first."""
    row = _visible(session, name, caller)
    events = session.scalars(
        select(EventRow).where(EventRow.job_id == row.id).order_by(EventRow.id)
    )
    return [EventView(time=e.time, kind=e.kind, message=e.message) for e in events]


@router.get("/{name}/why", response_model=WhyView)
def why_pending(name: str, caller: Caller, session: DbSession) -> WhyView:
    """The engine's latest reason for where the job is (for a pending job: what to change)."""
    row = _visible(session, name, caller)
    return WhyView(name=row.name, phase=row.phase, reason=row.reason, message=row.message)


@router.get("/{name}/logs", response_class=PlainTextResponse)
def job_logs(
    name: str,
    caller: Caller,
    session: DbSession,
    controller: TheController,
    task: Annotated[str | None, Query(description="one task (default: the job's first)")] = None,
    stream: LogStream = LogStream.STDOUT,
    follow: Annotated[
        bool, Query(description="keep sending new output until the job ends")
    ] = False,
    tail: Annotated[
        int, Query(ge=0, le=2**30, description="bytes from the end (of each task's log)")
    ] = 2**20,
    all_tasks: Annotated[
        bool, Query(alias="all", description="every task's lines, each as 'TASK | line'")
    ] = False,
) -> Any:
    """A task's output (the first task by default), read through the executor wherever
    the task ran; ``all`` gives every task's lines, prefixed with the task's name.
    ``follow`` streams new output until the job has ended and all of it was sent."""
    row = _visible(session, name, caller)
    names = [t.name for t in row.tasks]
    if all_tasks and task is not None:
        raise ApiError(
            422,
            f"task {task!r} and all=true ask for one task and for every task",
            field="all",
            fix="leave out task to get every task's output, or all to get one task's",
        )
    chosen = names if all_tasks else [task or (names[0] if names else "")]
    if not all_tasks and chosen[0] not in names:
        raise ApiError(
            404,
            f"job {name} has no task {task!r}",
            field="task",
            fix=f"one of: {', '.join(names[:20])}",
        )
    logs = [(each, _task_log(controller, row.name, each, stream)) for each in chosen]
    live = JobLiveness(lambda: controller.view, row.name, stored_live=row.phase not in _TERMINAL)
    if all_tasks:
        lines = prefixed_follow(logs, tail, live) if follow else prefixed_tail(logs, tail)
        return StreamingResponse(lines, media_type="text/plain")
    if not follow:
        return PlainTextResponse(read_tail(logs[0][1], tail).decode(errors="replace"))
    return StreamingResponse(follow_log(logs[0][1], tail, live), media_type="text/plain")


def _task_log(controller: TheController, job: str, task: str, stream: LogStream) -> TaskLog:
    log = controller.logs(job, task, stream)
    if log is None:
        raise ApiError(
            501, "this server's executor keeps no task logs", fix="read the output where it ran"
        )
    return log


def _visible(session: DbSession, name: str, caller: Principal) -> JobRow:
    row = session.scalar(
        select(JobRow).where(JobRow.name == name).options(selectinload(JobRow.tasks))
    )
    # Another user's job is reported as missing: its existence is not theirs to know.
    if row is None or (not caller.is_admin and row.user != caller.name):
        raise ApiError(
            404, f"no job named {name!r}", field="name", fix="list your jobs: phalanx get jobs"
        )
    return row


def job_view(row: JobRow, *, with_tasks: bool = False, with_document: bool = False) -> JobView:
    """The API's picture of a stored job."""
    tasks = (
        [
            TaskView(
                name=t.name,
                role=t.role,
                index=t.index,
                phase=t.phase,
                node=t.node,
                gpus=list(t.gpus or []),
                exit_code=t.exit_code,
                started_at=t.started_at,
                finished_at=t.finished_at,
            )
            for t in row.tasks
        ]
        if with_tasks
        else []
    )
    return JobView(
        name=row.name,
        queue=row.queue,
        user=row.user,
        phase=row.phase,
        reason=row.reason,
        message=row.message,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        attempts=row.attempts,
        preemptions=row.preemptions,
        cancel_requested=row.cancel_requested,
        requests=requested(row.document),
        tasks=tasks,
        document=row.document if with_document else None,
    )
