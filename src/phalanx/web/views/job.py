"""``/ui/jobs/{name}``: one job: its tasks' placements (node, GPU ids), why it waits and
its place in its queue's line, its events, the size history of an elastic job, its logs
(the end of every task's, each in a section of its own, or one task's) as they are
written, a chart of its GPUs' utilisation and memory over time with the summary line
and the idle mark (a job that asks for GPUs only: ``web.gpu_chart``), and a cancel
button.

Another user's job is "not found", as the API says. The page refreshes its details
(``/ui/fragments/jobs/{name}``) and its log (``/ui/fragments/jobs/{name}/logs``) until
the job has ended; both answers say ``X-Phalanx-Final: 1`` from then on. Nothing is
shown empty without saying why: a job without events says so, and a log box with
nothing to show says whether no task has started (with the reason the job waits), or
none has written yet, or none wrote anything (``web.logs``).
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from phalanx.client import ClientError, JobView
from phalanx.web.console import console_of
from phalanx.web.gpu_chart import chart, summary
from phalanx.web.logs import WAITING, TaskTail, each_tail, empty_state, split_tasks, state_label
from phalanx.web.session import ROOT, Signed, SignedForm, Visitor
from phalanx.web.views.jobs import ENDED

router = APIRouter()

#: Bytes of a task's log a page shows (the end of it); of every task's together, with
#: every task's, each task's share being at most ``EACH_TAIL`` and at least ``LEAST_TAIL``.
LOG_TAIL: Final = 256 * 1024
EACH_TAIL: Final = 16 * 1024
LEAST_TAIL: Final = 2 * 1024
FINAL: Final = "X-Phalanx-Final"


def _elastic_roles(job: JobView) -> list[dict[str, Any]]:
    """The roles of ``job``'s document that are elastic, with their range and size asked."""
    roles = (job.document or {}).get("spec", {}).get("roles", [])
    return [
        {
            "name": role.get("name", ""),
            "replicas": role.get("replicas"),
            "min": role["elastic"].get("minReplicas"),
            "max": role["elastic"].get("maxReplicas"),
        }
        for role in roles
        if isinstance(role, dict) and isinstance(role.get("elastic"), dict)
    ]


def _gpu_context(visitor: Visitor, job: JobView) -> dict[str, Any] | None:
    """What the job did with its GPUs (``GET /api/v1/jobs/{name}/gpus``): the summary, the
    chart and each task's latest reading; None for a job that asks for no GPU. A refusal
    of the API is said in place of the chart (the rest of the page stands)."""
    if job.requests.get("gpu", 0.0) <= 0 and not any(task.gpus for task in job.tasks):
        return None
    try:
        view = visitor.client.job_gpus(job.name)
    except ClientError as error:
        if error.status == 401:
            raise
        return {"refused": error.message(), "summary": None, "chart": None, "tasks": []} | {
            "idle_since": None
        }
    return {
        "refused": "",
        "summary": summary(view),
        "chart": chart(view),
        "tasks": view.tasks,
        "idle_since": view.idle_since,
    }


def _context(visitor: Visitor, name: str) -> dict[str, Any]:
    job = visitor.client.job(name)
    events = visitor.client.events(name)
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "job": job,
        "ended": job.phase in ENDED,
        "events": list(reversed(events)),
        "elastic": _elastic_roles(job),
        "sizes": [event for event in events if event.kind == "Resized"],
        "quoted": quote(name, safe=""),
        "gpu_use": _gpu_context(visitor, job),
    }


def _log_context(visitor: Visitor, job: JobView, stream: str) -> dict[str, Any]:
    """The end of every task's log of ``job`` (read after ``job``: a job seen ended has
    written all it will), a tail per task in the job's order."""
    tasks = [(task.name, task.phase) for task in job.tasks]
    share = each_tail(LOG_TAIL, EACH_TAIL, LEAST_TAIL, len(tasks) + job.tasks_omitted)
    text, refusal = _read(visitor, job.name, "", stream, share)
    return _log_view(
        phase=job.phase,
        why=job.message or job.reason,
        stream=stream,
        task="",
        shown=split_tasks(text, tasks),
        refusal=refusal,
    )


def _log_view(
    *, phase: str, why: str, stream: str, task: str, shown: list[TaskTail], refusal: str
) -> dict[str, Any]:
    """What ``fragments/logs.html`` draws: the tails that hold text, else what to say
    (``refusal``, the API's, when it refused to read the log)."""
    waiting, ended = phase in WAITING, phase in ENDED
    if not any(tail.text for tail in shown):
        shown = []  # the empty state says why instead
    return {
        "every": not task,
        "shown": shown,
        "empty": refusal
        or empty_state(waiting=waiting, ended=ended, why=why, stream=stream, task=task),
        "label": state_label(waiting=waiting, ended=ended, shown=shown),
        "ended": ended,
    }


def _read(visitor: Visitor, name: str, task: str, stream: str, tail: int) -> tuple[str, str]:
    """The end of one task's log (``task``), or of every task's as ``TASK | line`` lines,
    and "", or "" and the API's refusal when it has no such task."""
    try:
        chunks = visitor.client.logs(
            name,
            task or None,
            "stderr" if stream == "stderr" else "stdout",
            all_tasks=not task,
            tail=tail,
        )
    except ClientError as error:
        if error.status != 404:
            raise
        return "", f"({error.message()})"
    with chunks:
        return "".join(chunks), ""


def _final(response: Response, ended: bool) -> Response:
    if ended:
        response.headers[FINAL] = "1"
    return response


@router.get("/jobs/{name}")
def job_page(request: Request, name: str, visitor: Signed) -> Response:
    """The job's page, its log box showing the end of every task's stdout."""
    context = _context(visitor, name)
    log = _log_context(visitor, context["job"], "stdout")
    return console_of(request).templates.TemplateResponse(
        request, "job.html", {**context, "log": log, "page": "jobs"}
    )


@router.get("/fragments/jobs/{name}")
def job_fragment(request: Request, name: str, visitor: Signed) -> Response:
    """The job's details alone, for the page's refresh."""
    context = _context(visitor, name)
    response = console_of(request).templates.TemplateResponse(
        request, "fragments/job.html", context
    )
    return _final(response, context["ended"])


@router.get("/fragments/jobs/{name}/logs")
def job_logs(
    request: Request,
    name: str,
    visitor: Signed,
    task: Annotated[str, Query(max_length=300)] = "",
    stream: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout",
) -> Response:
    """The log box's content, as HTML: the end of every task's log, a section per task
    in the job's order (``task`` empty), or the end of one task's (``task``); or, when
    there is nothing to show, why (``fragments/logs.html``)."""
    if task:
        why = visitor.client.why(name)  # read first: nothing is written after the end
        text, refusal = _read(visitor, name, task, stream, LOG_TAIL)
        log = _log_view(
            phase=why.phase,
            why=why.message or why.reason,
            stream=stream,
            task=task,
            shown=[TaskTail(task=task, phase="", text=text[-LOG_TAIL:])],
            refusal=refusal,
        )
    else:
        log = _log_context(visitor, visitor.client.job(name), stream)
    response = console_of(request).templates.TemplateResponse(
        request, "fragments/logs.html", {"log": log}
    )
    return _final(response, log["ended"])


@router.post("/jobs/{name}/cancel")
def cancel(name: str, _: SignedForm, visitor: Signed) -> Response:
    """Ask for the job to be cancelled, then show its page."""
    visitor.client.cancel(name)
    return RedirectResponse(f"{ROOT}/jobs/{quote(name, safe='')}", status_code=303)
