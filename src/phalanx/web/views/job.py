"""``/ui/jobs/{name}``: one job: its tasks' placements (node, GPU ids), why it waits and
its place in its queue's line, its events, the size history of an elastic job, its logs
(every task, or one) as they are written, and a cancel button.

Another user's job is "not found", as the API says. The page refreshes its details
(``/ui/fragments/jobs/{name}``) and its log (``/ui/fragments/jobs/{name}/logs``) until
the job has ended; both answers say ``X-Phalanx-Final: 1`` from then on.
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response

from phalanx.client import ClientError, JobView
from phalanx.web.console import console_of
from phalanx.web.session import ROOT, Signed, SignedForm, Visitor
from phalanx.web.views.jobs import ENDED

router = APIRouter()

#: Bytes of a task's log a page shows (the end of it); of each task's, with every task's.
LOG_TAIL: Final = 256 * 1024
EACH_TAIL: Final = 16 * 1024
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
    }


def _final(response: Response, ended: bool) -> Response:
    if ended:
        response.headers[FINAL] = "1"
    return response


@router.get("/jobs/{name}")
def job_page(request: Request, name: str, visitor: Signed) -> Response:
    """The job's page."""
    context = _context(visitor, name)
    return console_of(request).templates.TemplateResponse(
        request, "job.html", {**context, "page": "jobs"}
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
    name: str,
    visitor: Signed,
    task: Annotated[str, Query(max_length=300)] = "",
    stream: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout",
) -> Response:
    """The end of one task's log (``task``), or of every task's as ``TASK | line``
    (``task`` empty), as text."""
    ended = visitor.client.why(name).phase in ENDED  # read first: nothing is written after
    try:
        chunks = visitor.client.logs(
            name,
            task or None,
            "stderr" if stream == "stderr" else "stdout",
            all_tasks=not task,
            tail=LOG_TAIL if task else EACH_TAIL,
        )
    except ClientError as error:
        if error.status != 404:
            raise
        return _final(PlainTextResponse(f"({error.message()})"), ended)
    with chunks:
        text = "".join(chunks)
    return _final(PlainTextResponse(text[-LOG_TAIL:]), ended)


@router.post("/jobs/{name}/cancel")
def cancel(name: str, _: SignedForm, visitor: Signed) -> Response:
    """Ask for the job to be cancelled, then show its page."""
    visitor.client.cancel(name)
    return RedirectResponse(f"{ROOT}/jobs/{quote(name, safe='')}", status_code=303)
