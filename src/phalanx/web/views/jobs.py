"""``/ui/jobs``: the visitor's jobs (an admin's: everyone's), with phase, queue and why
each waits; the list refreshes itself (``/ui/fragments/jobs``)."""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from phalanx.client import JobSummaryView
from phalanx.web.console import console_of
from phalanx.web.session import ROOT, Signed, Visitor

router = APIRouter()

#: Phases in which a job is over.
ENDED: Final = frozenset({"Succeeded", "Failed", "Cancelled"})
#: Most jobs a list shows (the newest).
SHOWN: Final = 500


def _context(visitor: Visitor) -> dict[str, Any]:
    jobs: list[JobSummaryView] = visitor.client.jobs()
    live = [job for job in jobs if job.phase not in ENDED]
    ended = [job for job in jobs if job.phase in ENDED]
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "live": list(reversed(live))[:SHOWN],
        "ended": list(reversed(ended))[:SHOWN],
        "omitted": max(0, len(live) - SHOWN) + max(0, len(ended) - SHOWN),
        "everyone": visitor.is_admin,
    }


@router.get("/")
def front(_: Signed) -> Response:
    """The front page is the list of jobs."""
    return RedirectResponse(f"{ROOT}/jobs", status_code=303)


@router.get("/jobs")
def jobs_page(request: Request, visitor: Signed) -> Response:
    """The jobs page."""
    return console_of(request).templates.TemplateResponse(
        request, "jobs.html", {**_context(visitor), "page": "jobs"}
    )


@router.get("/fragments/jobs")
def jobs_fragment(request: Request, visitor: Signed) -> Response:
    """The list alone, for the page's refresh."""
    return console_of(request).templates.TemplateResponse(
        request, "fragments/jobs.html", _context(visitor)
    )
