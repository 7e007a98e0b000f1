"""``/ui/jobs``: the visitor's jobs (an admin's: everyone's), with phase, queue and why
each waits; the list refreshes itself (``/ui/fragments/jobs``). Live jobs only, unless
``ended`` asks for the ended ones too (the API lists jobs oldest first, page by page:
the ended ones are most of a busy server's jobs, and are read only when asked for)."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from phalanx.client import JobSummaryView
from phalanx.web.console import console_of
from phalanx.web.session import ROOT, Signed, Visitor

router = APIRouter()

#: Phases in which a job is over, and those in which it is live.
ENDED: Final = frozenset({"Succeeded", "Failed", "Cancelled"})
LIVE: Final = ("Pending", "Queued", "Running")
#: Most jobs a list shows (the newest).
SHOWN: Final = 500


Ended = Annotated[bool, Query(description="list the ended jobs too")]


def _context(visitor: Visitor, ended_too: bool) -> dict[str, Any]:
    jobs: list[JobSummaryView] = visitor.client.jobs(phase=None if ended_too else LIVE)
    live = [job for job in jobs if job.phase not in ENDED]
    ended = [job for job in jobs if job.phase in ENDED]
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "live": list(reversed(live))[:SHOWN],
        "ended": list(reversed(ended))[:SHOWN],
        "omitted": max(0, len(live) - SHOWN) + max(0, len(ended) - SHOWN),
        "everyone": visitor.is_admin,
        "ended_too": ended_too,
    }


@router.get("/")
def front(_: Signed) -> Response:
    """The front page is the list of jobs."""
    return RedirectResponse(f"{ROOT}/jobs", status_code=303)


@router.get("/jobs")
def jobs_page(request: Request, visitor: Signed, ended: Ended = False) -> Response:
    """The jobs page."""
    return console_of(request).templates.TemplateResponse(
        request, "jobs.html", {**_context(visitor, ended), "page": "jobs"}
    )


@router.get("/fragments/jobs")
def jobs_fragment(request: Request, visitor: Signed, ended: Ended = False) -> Response:
    """The list alone, for the page's refresh."""
    return console_of(request).templates.TemplateResponse(
        request, "fragments/jobs.html", _context(visitor, ended)
    )
