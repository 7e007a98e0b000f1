"""``/ui/jobs``: the visitor's jobs (an admin's: everyone's), with phase, queue, place in
its queue's line while waiting, and why each waits; the list refreshes itself
(``/ui/fragments/jobs``). Live jobs only, unless ``ended`` asks for the ended ones too
(the ended ones are most of a busy server's jobs, and are read only when asked for). The
newest ``SHOWN`` of each are read, newest first, never every job: a refresh costs one
API page however many jobs wait."""

from __future__ import annotations

from itertools import islice
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


def _newest(visitor: Visitor, phases: tuple[str, ...]) -> tuple[list[JobSummaryView], bool]:
    """The newest ``SHOWN`` visible jobs in ``phases``, and whether older ones exist."""
    found = visitor.client.iter_jobs(phase=phases, newest_first=True, page_size=SHOWN + 1)
    jobs = list(islice(found, SHOWN + 1))
    return jobs[:SHOWN], len(jobs) > SHOWN


def _context(visitor: Visitor, ended_too: bool) -> dict[str, Any]:
    live, more = _newest(visitor, LIVE)
    ended: list[JobSummaryView] = []
    if ended_too:
        ended, more_ended = _newest(visitor, tuple(sorted(ENDED)))
        more = more or more_ended
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "live": live,
        "ended": ended,
        "more": more,
        "shown": SHOWN,
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
