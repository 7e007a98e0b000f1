"""``/ui/admin`` (admins only): the queue tree as bars, the cluster as a heatmap of
nodes x GPUs, the jobs that wait with the scheduler's reasons, and charts of the
server's recent metrics (``/api/v1/system/history``); it refreshes itself
(``/ui/fragments/admin``)."""

from __future__ import annotations

import time
from itertools import islice
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.web.charts import WINDOW, charts
from phalanx.web.console import console_of
from phalanx.web.pictures import heatmap, queue_tree
from phalanx.web.session import AdminVisitor, Visitor

router = APIRouter()

#: Waiting jobs listed (the longest waiting first); the others are counted.
WAITING_SHOWN: Final = 100
_WAITING: Final = ("Pending", "Queued")


def _context(visitor: Visitor) -> dict[str, Any]:
    client = visitor.client
    queues = client.queues()
    waiting = list(islice(client.iter_jobs(phase=_WAITING, page_size=WAITING_SHOWN), WAITING_SHOWN))
    now = time.time()
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "queues": queue_tree(queues),
        "domains": heatmap(client.nodes()),
        "waiting": waiting,
        "waiting_total": sum(q.jobs.get(p, 0) for q in queues for p in _WAITING),
        "charts": charts(client.history(since=now - WINDOW), now=now),
        "window_minutes": int(WINDOW // 60),
    }


@router.get("/admin")
def admin_page(request: Request, visitor: AdminVisitor) -> Response:
    """The admin page."""
    return console_of(request).templates.TemplateResponse(
        request, "admin.html", {**_context(visitor), "page": "admin"}
    )


@router.get("/fragments/admin")
def admin_fragment(request: Request, visitor: AdminVisitor) -> Response:
    """The admin page's body alone, for its refresh."""
    return console_of(request).templates.TemplateResponse(
        request, "fragments/admin.html", _context(visitor)
    )
