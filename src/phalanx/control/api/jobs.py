"""``/api/v1/jobs``: submit, list, get, cancel, scale, events, logs and "why pending"."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from phalanx.control.api.deps import Caller, DbSession, TheController, errors
from phalanx.control.api.job_views import job_summaries, job_view, task_view
from phalanx.control.api.logs import (
    JobLiveness,
    Window,
    absences,
    before,
    prefixed_follow,
    prefixed_tail,
    since_note,
)
from phalanx.control.api.logs import follow as follow_log
from phalanx.control.api.logs import tail as read_tail
from phalanx.control.auth import Principal
from phalanx.control.batcher import SubmissionWriter
from phalanx.control.controllers.intents import Intent
from phalanx.control.errors import ApiError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.models import JobRow
from phalanx.control.submit import parse_job
from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.executors.base import LogAbsence, LogStream, TaskLog
from phalanx.spec.job import JobDocument
from phalanx.wire.bodies import ScaleRequest
from phalanx.wire.views import EventView, JobPage, JobView, TaskPage, WhyView

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"], responses=errors(401, 422))


#: Warning headers of one answer, at most (a document has few fields; this bounds it).
MAX_WARNINGS: Final = 100


def warning_header(line: str) -> str:
    """``line`` as the value of an HTTP ``Warning`` header (RFC 7234, code 299, as
    Kubernetes sends them): ASCII, quotes and backslashes escaped, no line breaks."""
    text = line.replace("\\", "\\\\").replace('"', '\\"')
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else " " for c in text)
    return f'299 - "{text}"'


@router.post("", status_code=201, response_model=JobView, responses=errors(400, 403, 409))
async def submit(
    document: Annotated[
        dict[str, Any],
        Body(description="a Job document: phalanx, Volcano, OpenPAI or Kubeflow form"),
    ],
    caller: Caller,
    request: Request,
    controller: TheController,
) -> Response:
    """Submit a job. It starts Pending; the scheduler takes it from there. The answer
    comes once the job is stored. Each field of a foreign document that phalanx read
    but does not honour is one ``Warning: 299 - "..."`` header of the answer, as the
    Kubernetes API server tells of them."""
    warnings: list[str] = []
    job = parse_job(document, caller, warnings.append)  # CPU only: no thread hop
    writer: SubmissionWriter = request.app.state.submissions
    view = await writer.submit(job, caller)
    controller.wake(Intent.JOBS)
    # The view is built here, valid by construction: skip FastAPI's second validation.
    answer = Response(view.model_dump_json(), status_code=201, media_type="application/json")
    for line in warnings[:MAX_WARNINGS]:
        answer.headers.append("Warning", warning_header(line))
    return answer


@router.get("", response_model=JobPage)
def list_jobs(
    caller: Caller,
    session: DbSession,
    controller: TheController,
    queue: str | None = None,
    phase: Annotated[list[JobPhase] | None, Query()] = None,
    user: str | None = None,
    after: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="the 'next' of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    order: Annotated[
        Literal["oldest", "newest"], Query(description="oldest (default) or newest first")
    ] = "oldest",
) -> JobPage:
    """Jobs, oldest first (``order=newest``: newest first), a page at a time, each with
    its task counts by phase (not its tasks) and, while it waits, its place in its
    queue's line. Users see their own jobs; admins see all."""
    rows = stored_jobs.page(
        session,
        limit=limit + 1,
        newest=order == "newest",
        user=user if caller.is_admin else caller.name,
        queue=queue,
        phases=[p.value for p in phase or ()],
        after=after,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    items = job_summaries(session, rows, controller.view.positions)
    return JobPage(items=items, next=rows[-1].id if more and rows else None)


@router.get("/{name}", response_model=JobView, responses=errors(404))
def get_job(name: str, caller: Caller, session: DbSession, controller: TheController) -> JobView:
    """One job with its document, its task counts, its first 1,000 tasks (the rest:
    ``/tasks``) and, while it waits, its place in its queue's line and (when the
    scheduler has the fairshare plugin) its multifactor priority."""
    row = visible_job(session, name, caller)
    view = controller.view  # one view: the places and priorities of one tick
    return job_view(
        session, row, with_document=True, places=view.positions, priorities=view.priorities
    )


@router.get("/{name}/tasks", response_model=TaskPage, responses=errors(404))
def list_tasks(
    name: str,
    caller: Caller,
    session: DbSession,
    phase: Annotated[list[TaskPhase] | None, Query()] = None,
    after: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="the 'next' of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
) -> TaskPage:
    """A job's tasks in order (role by role, replica by replica), a page at a time."""
    row = visible_job(session, name, caller)
    tasks = stored_jobs.tasks(
        session, row.id, limit=limit + 1, phases=[p.value for p in phase or ()], after=after
    )
    more = len(tasks) > limit
    tasks = tasks[:limit]
    return TaskPage(
        items=[task_view(task) for task in tasks], next=tasks[-1].id if more and tasks else None
    )


@router.post("/{name}/cancel", response_model=JobView, responses=errors(404))
def cancel_job(name: str, caller: Caller, session: DbSession, controller: TheController) -> JobView:
    """Ask for the job to be cancelled: its tasks are stopped, then it is Cancelled."""
    row = visible_job(session, name, caller)
    live = row.phase not in stored_jobs.ENDED
    if live:
        row.cancel_requested = True
    view = job_view(session, row)
    if live:
        session.commit()
        controller.wake(Intent.CANCELS)
    return view


@router.post("/{name}/scale", response_model=JobView, responses=errors(400, 404, 409))
def scale_job(
    name: str,
    body: ScaleRequest,
    caller: Caller,
    session: DbSession,
    controller: TheController,
) -> JobView:
    """Set the size the job's owner asks of its elastic role, within its range: replicas
    are added (and placed when there is room) or the highest are stopped."""
    row = visible_job(session, name, caller)
    if row.phase in stored_jobs.ENDED:
        raise ApiError(
            409, f"job {name!r} has ended ({row.phase})", field="name", fix="scale a live job"
        )
    role = JobDocument.model_validate(row.document).to_domain().elastic_role()
    if role is None or role.elastic is None:
        raise ApiError(
            400,
            f"job {name!r} has no elastic role",
            field="replicas",
            fix="give a role elastic: {minReplicas, maxReplicas} when submitting it",
        )
    low, high = role.elastic.min_replicas, role.elastic.max_replicas
    if not low <= body.replicas <= high:
        raise ApiError(
            400,
            f"{body.replicas} replicas is outside role {role.name}'s elastic range {low}..{high}",
            field="replicas",
            fix=f"give {low}..{high}",
        )
    document = copy.deepcopy(row.document)
    for written in document["spec"]["roles"]:
        if written["name"] == role.name:
            written["replicas"] = body.replicas
    row.document = document
    row.scale_requested = True
    # read before the commit ends the transaction
    view = job_view(session, row, places=controller.view.positions, with_document=True)
    session.commit()
    controller.wake(Intent.SCALES)
    return view


@router.delete("/{name}", response_model=JobView, responses=errors(404))
def delete_job(name: str, caller: Caller, session: DbSession, controller: TheController) -> JobView:
    """Remove an ended job (with its tasks and events). A live one is cancelled and
    removed by the controller once its tasks have stopped (``delete_requested``)."""
    row = visible_job(session, name, caller)
    view = job_view(session, row)
    if row.phase not in stored_jobs.ENDED:
        # Only while it is live: a job the controller ends meanwhile is deleted here
        # instead (its ending tick would not see a flag set after it).
        if stored_jobs.request_cancel(session, [row.name], delete=True):
            session.commit()
            controller.wake(Intent.CANCELS)
            view.cancel_requested = view.delete_requested = True
            return view
        session.expire(row)
        view = job_view(session, row)
    session.delete(row)
    session.commit()
    return view


@router.get("/{name}/events", response_model=list[EventView], responses=errors(404))
def job_events(name: str, caller: Caller, session: DbSession) -> list[EventView]:
    """What happened to the job, oldest first."""
    row = visible_job(session, name, caller)
    events = stored_jobs.events(session, row.id)
    return [EventView(time=e.time, kind=e.kind, message=e.message) for e in events]


@router.get("/{name}/why", response_model=WhyView, responses=errors(404))
def why_pending(name: str, caller: Caller, session: DbSession) -> WhyView:
    """The engine's latest reason for where the job is (for a pending job: what to change)."""
    row = visible_job(session, name, caller)
    return WhyView(name=row.name, phase=row.phase, reason=row.reason, message=row.message)


@router.get(
    "/{name}/logs",
    response_class=Response,  # the answers are text; errors keep the JSON error shape
    responses={
        200: {
            "description": "The output, as text; a ``Warning`` header for each task whose "
            "output is left out (its log cannot be read, or ``since`` leaves it out).",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **errors(404, 501),
    },
)
def job_logs(
    name: str,
    request: Request,
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
    lines: Annotated[
        int | None,
        Query(ge=0, le=2**30, description="only the last lines (of each task's log, within tail)"),
    ] = None,
    since: Annotated[
        float | None,
        Query(
            ge=0,
            description="seconds: only the output of tasks whose current run started within "
            "this long (a log's lines carry no time stamps); the others' new output only",
        ),
    ] = None,
    all_tasks: Annotated[
        bool, Query(alias="all", description="every task's lines, each as 'TASK | line'")
    ] = False,
) -> Any:
    """A task's output (the first task by default), read through the executor wherever
    the task ran; ``all`` gives every task's lines, prefixed with the task's name.
    ``follow`` streams new output until the job has ended and all of it was sent. A task
    that started has a log: when it cannot be read where the server looks (a server
    restarted with another tasks dir, a file removed), the answer is 404 saying where it
    was looked for (with ``all``: a ``Warning`` for each such task, 404 when no started
    task's log can be read)."""
    row = visible_job(session, name, caller)
    if all_tasks and task is not None:
        raise ApiError(
            422,
            f"task {task!r} and all=true ask for one task and for every task",
            field="all",
            fix="leave out task to get every task's output, or all to get one task's",
        )
    chosen = _task_starts(session, row, None if all_tasks else task or "")
    logs = [(each, _task_log(controller, row.name, each, stream)) for each, _ in chosen]
    missing = absences(logs, {each for each, started in chosen if started is not None})
    if missing and (not all_tasks or len(missing) == sum(s is not None for _, s in chosen)):
        raise _unreadable(row.name, stream, missing)
    older = [] if since is None else before(chosen, time.time() - since)
    live = JobLiveness(
        lambda: controller.view, row.name, stored_live=row.phase not in stored_jobs.ENDED
    )
    reading = _Reading(
        window=Window(size=tail, lines=lines),
        live=live,
        stopping=request.app.state.stopping.is_set,
        follow=follow,
        older=older,
    )
    if all_tasks:
        answer = reading.every_task([(each, log) for each, log in logs if each not in missing])
    else:
        answer = reading.one_task(logs[0][1])
    for line in _log_notes(stream, missing, older, since)[:MAX_WARNINGS]:
        answer.headers.append("Warning", warning_header(line))
    return answer


@dataclass(frozen=True, slots=True, kw_only=True)
class _Reading:
    """How the logs of one request are read: the window of each log, whether (and until
    when) new output is followed, and the tasks whose output so far ``since`` leaves out."""

    window: Window
    live: JobLiveness
    stopping: Callable[[], bool]
    follow: bool
    older: list[str]

    def every_task(self, shown: list[tuple[str, TaskLog]]) -> Response:
        """Every task's lines, each prefixed with its task's name."""
        lines = (
            prefixed_follow(shown, self.window, self.live, stopping=self.stopping, older=self.older)
            if self.follow
            else prefixed_tail(shown, self.window, older=self.older)
        )
        return StreamingResponse(lines, media_type="text/plain")

    def one_task(self, log: TaskLog) -> Response:
        """One task's output (none of what it wrote so far when ``since`` leaves it out)."""
        window = Window(size=0) if self.older else self.window
        if self.follow:
            followed = follow_log(log, window, self.live, stopping=self.stopping)
            return StreamingResponse(followed, media_type="text/plain")
        return PlainTextResponse(read_tail(log, window).decode(errors="replace"))


def _log_notes(
    stream: LogStream, missing: dict[str, LogAbsence], older: list[str], since: float | None
) -> list[str]:
    """The ``Warning`` lines of an answer: each task whose log cannot be read, and the
    tasks whose output so far ``since`` leaves out."""
    notes = [
        f"no {stream} of task {t} to show: {w.reason}; fix: {w.fix}" for t, w in missing.items()
    ]
    return notes + ([since_note(older, since)] if older and since is not None else [])


def _unreadable(job: str, stream: LogStream, missing: dict[str, LogAbsence]) -> ApiError:
    """The 404 for a request none of whose started tasks' logs can be read."""
    (first, why), more = next(iter(missing.items())), len(missing) - 1
    others = f" (and {more} more task(s) of job {job} alike)" if more else ""
    return ApiError(
        404, f"no {stream} of task {first} to show: {why.reason}{others}", field="task", fix=why.fix
    )


def _task_log(controller: TheController, job: str, task: str, stream: LogStream) -> TaskLog:
    log = controller.logs(job, task, stream)
    if log is None:
        raise ApiError(
            501, "this server's executor keeps no task logs", fix="read the output where it ran"
        )
    return log


def _task_starts(
    session: DbSession, row: JobRow, task: str | None
) -> list[tuple[str, float | None]]:
    """Every task of the job (``task`` None), or the one named ``task`` ("": its first),
    with the start of its current run (None: not started)."""
    if task is None:
        return stored_jobs.task_starts(session, row.id)
    found = stored_jobs.task_starts(session, row.id, name=task or None, limit=1)
    if not found:
        some = [name for name, _ in stored_jobs.task_starts(session, row.id, limit=20)]
        raise ApiError(
            404,
            f"job {row.name} has no task {task!r}",
            field="task",
            fix=f"one of: {', '.join(some)}",
        )
    return found


def visible_job(session: DbSession, name: str, caller: Principal) -> JobRow:
    """Job ``name`` when the caller may see it (theirs, or any for an admin); 404 else."""
    row = stored_jobs.by_name(session, name)
    # Another user's job is reported as missing: its existence is not theirs to know.
    if row is None or (not caller.is_admin and row.user != caller.name):
        raise ApiError(
            404, f"no job named {name!r}", field="name", fix="list your jobs: phalanx get jobs"
        )
    return row
