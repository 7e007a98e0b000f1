"""``/ui/gpus``: the cluster's cards as a grid, a row per node and a cell per card, each
coloured by its utilisation at its node's latest reading, with its memory and the tasks
given it (``web.gpu_grid``); it refreshes itself (``/ui/fragments/gpus``).

Guarantees: every figure is the API's answer (``GET /api/v1/nodes``) for the visitor, so
a user sees the names of their own tasks on a card and only a count of the others', an
admin every name; what a card does and whether it is cordoned everyone sees, as the API
says. A node whose cards are not read says why, and its cards are drawn unread, never as
idle.
"""

from __future__ import annotations

import time
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.web.console import console_of
from phalanx.web.gpu_grid import LEGEND, STALE, grid, heat
from phalanx.web.session import Signed, Visitor

router = APIRouter()

#: Milliseconds between refreshes (nodes read their cards every few seconds).
EVERY: Final = 3000


def _context(visitor: Visitor) -> dict[str, Any]:
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "grid": grid(visitor.client.nodes(), now=time.time()),
        "is_admin": visitor.is_admin,
        "legend": [(level, heat(level)) for level in LEGEND],
        "stale": int(STALE),
    }


@router.get("/gpus")
def gpus_page(request: Request, visitor: Signed) -> Response:
    """The GPUs page."""
    return console_of(request).templates.TemplateResponse(
        request, "gpus.html", {**_context(visitor), "page": "gpus", "every": EVERY}
    )


@router.get("/fragments/gpus")
def gpus_fragment(request: Request, visitor: Signed) -> Response:
    """The grid alone, for the page's refresh."""
    return console_of(request).templates.TemplateResponse(
        request, "fragments/gpus.html", _context(visitor)
    )
