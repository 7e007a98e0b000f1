"""``/ui/inferences``: the visitor's inference services (an admin's: everyone's), by name,
each with its owner, whether it is Ready, each predictor's model version, traffic share,
Ready and running replicas and replica range, and the gateway's path of it; the list
refreshes itself (``/ui/fragments/inferences``).

Every service the API lists is shown (the API reads them all in one answer: services
are few, each a handful of replicas)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.web.console import console_of
from phalanx.web.session import Signed, Visitor

router = APIRouter()


def _context(visitor: Visitor) -> dict[str, Any]:
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "services": visitor.client.inferences(),
        "everyone": visitor.is_admin,
    }


@router.get("/inferences")
def inferences_page(request: Request, visitor: Signed) -> Response:
    """The inference services page."""
    return console_of(request).templates.TemplateResponse(
        request, "inferences.html", {**_context(visitor), "page": "inferences"}
    )


@router.get("/fragments/inferences")
def inferences_fragment(request: Request, visitor: Signed) -> Response:
    """The list alone, for the page's refresh."""
    return console_of(request).templates.TemplateResponse(
        request, "fragments/inferences.html", _context(visitor)
    )
