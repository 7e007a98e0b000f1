"""``/ui/inferences/{name}``: one inference service: whether it is Ready and where the
gateway serves it; each predictor's model version (pinned, digest included), traffic
share, replica range and Ready count; each replica (its job, linked to the job's page,
its phase, whether it is Ready, its port); its rollouts, newest first, each with its
phase, the versions it moves between, its steps with the one it stands at marked, the
new version's traffic share now, why it stands where it does, and its history (time,
action, traffic, the window's requests, errors and p99); and the document as stored,
as YAML; the tunings of it, each linked to its page (``/ui/tunings/NAME``: its trials
on a chart).

Another user's service is "not found", as the API says. The page refreshes all but the
document (``/ui/fragments/inferences/{name}``) for as long as it is open: a service
never ends (a deleted one is not found, and the page keeps what it last showed).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.client import InferenceView
from phalanx.web.console import console_of
from phalanx.web.services import document_text, steps_of
from phalanx.web.session import Signed, Visitor

router = APIRouter()


def _context(visitor: Visitor, service: InferenceView) -> dict[str, Any]:
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "service": service,
        "replicas": sum(len(predictor.replicas) for predictor in service.predictors),
        "steps": {rollout.id: steps_of(rollout) for rollout in service.rollouts},
        "quoted": quote(service.name, safe=""),
        "tunings": [
            t
            for t in visitor.client.tunings()
            if t.document.get("spec", {}).get("inference") == service.name
        ],
    }


@router.get("/inferences/{name}")
def inference_page(request: Request, name: str, visitor: Signed) -> Response:
    """The service's page."""
    service = visitor.client.inference(name)
    context = {
        **_context(visitor, service),
        "document": document_text(service.document),
        "page": "inferences",
    }
    return console_of(request).templates.TemplateResponse(request, "inference.html", context)


@router.get("/fragments/inferences/{name}")
def inference_fragment(request: Request, name: str, visitor: Signed) -> Response:
    """The service's predictors, replicas and rollouts alone, for the page's refresh."""
    context = _context(visitor, visitor.client.inference(name))
    return console_of(request).templates.TemplateResponse(
        request, "fragments/inference.html", context
    )
