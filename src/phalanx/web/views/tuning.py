"""``/ui/tunings/{name}``: one tuning: the service and predictor it tunes, its
objective, sampler and phase, the best spec so far, a chart of its measured trials
(cost against p99 latency, the SLO drawn; or against requests/s), and every trial
(candidate, state, node, what it measured, cost, value, what it fell short of).

Another user's tuning is "not found", as the API says. While it runs the page refreshes
all but its title (``/ui/fragments/tunings/{name}``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.client import TuningView
from phalanx.web.console import console_of
from phalanx.web.session import Signed, Visitor
from phalanx.web.tuning_chart import trial_chart

router = APIRouter()


def _context(visitor: Visitor, tuning: TuningView) -> dict[str, Any]:
    spec = tuning.document.get("spec", {})
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "tuning": tuning,
        "spec": spec,
        "objective": spec.get("objective", {}),
        "chart": trial_chart(tuning),
        "quoted": quote(tuning.name, safe=""),
    }


@router.get("/tunings/{name}")
def tuning_page(request: Request, name: str, visitor: Signed) -> Response:
    """The tuning's page."""
    context = {**_context(visitor, visitor.client.tuning(name)), "page": "inferences"}
    return console_of(request).templates.TemplateResponse(request, "tuning.html", context)


@router.get("/fragments/tunings/{name}")
def tuning_fragment(request: Request, name: str, visitor: Signed) -> Response:
    """The tuning's summary, chart and trials alone, for the page's refresh."""
    context = _context(visitor, visitor.client.tuning(name))
    return console_of(request).templates.TemplateResponse(request, "fragments/tuning.html", context)
