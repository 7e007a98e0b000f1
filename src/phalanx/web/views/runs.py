"""``/ui/runs``: the visitor's pipeline runs (an admin's: everyone's), newest first, with
pipeline, phase, start and duration; the list refreshes itself (``/ui/fragments/runs``).
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.client import RunView
from phalanx.web.console import console_of
from phalanx.web.session import Signed, Visitor

router = APIRouter()

#: Phases in which a run is over.
ENDED: Final = frozenset({"Succeeded", "Failed", "Cancelled"})
#: Most runs the list shows (the newest).
SHOWN: Final = 500


def _context(visitor: Visitor) -> dict[str, Any]:
    runs: list[RunView] = visitor.client.runs()
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "runs": list(reversed(runs))[:SHOWN],
        "omitted": max(0, len(runs) - SHOWN),
        "everyone": visitor.is_admin,
        "ended": ENDED,
    }


@router.get("/runs")
def runs_page(request: Request, visitor: Signed) -> Response:
    """The runs page."""
    return console_of(request).templates.TemplateResponse(
        request, "runs.html", {**_context(visitor), "page": "runs"}
    )


@router.get("/fragments/runs")
def runs_fragment(request: Request, visitor: Signed) -> Response:
    """The list alone, for the page's refresh."""
    return console_of(request).templates.TemplateResponse(
        request, "fragments/runs.html", _context(visitor)
    )
