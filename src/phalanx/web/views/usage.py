"""``/ui/usage``: what jobs held and what it cost, as ``phalanx usage`` says it: a row
per user, queue or job (``by``) with GPU-hours, CPU core-hours, memory GiB-hours, the
cost at the server's prices and what elastic jobs saved on reclaimable nodes, then the
total, over a period (``since`` .. ``until``; default the last 7 days up to now).

Guarantees: the rows are the API's answer (``GET /api/v1/usage``) for the visitor, so a
user sees their own usage only and an admin everyone's (or one user's: ``user``);
``since`` and ``until`` are passed to the API as typed (an ISO date or time, seconds
since the epoch, or a span ago such as ``7d``), so the page and the CLI read them alike.
An answer the API refuses (a time it cannot read, another user's usage asked by a
non-admin) is shown above the form with the API's message and fix, with the status the
API gave; the form keeps what was typed. An unknown ``by`` is refused the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.client import ClientError
from phalanx.web.console import console_of
from phalanx.web.session import Signed, Visitor
from phalanx.wire.usage import UsageBy, UsageRowView, UsageView

router = APIRouter()

#: The period shown when none is asked for: the last 7 days, up to now.
DEFAULT_SINCE: Final = "7d"
#: What a row can be, as the page offers it (the API also reports by allocation).
_BY: Final[dict[str, UsageBy]] = {"user": "user", "queue": "queue", "job": "job"}
GROUPS: Final = tuple(_BY)
#: The periods offered as links: (label, since).
PERIODS: Final = (("last 24 hours", "1d"), ("last 7 days", "7d"), ("last 30 days", "30d"))
#: The API refusals shown on the page itself (with the form), by status.
SHOWN_REFUSALS: Final = frozenset({400, 403, 404, 422})


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One row of the table, its figures written as people read them."""

    key: str
    user: str
    queue: str
    allocations: int
    gpu_hours: str
    cpu_hours: str
    memory_gib_hours: str
    cost: str
    saved: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """Why the page shows no table: the field at fault, the message and the fix."""

    field: str
    message: str
    fix: str


def figure(value: float) -> str:
    """``value`` with two decimals (thousands grouped), or as many as its first two
    significant digits need below 0.01 (``0.00028``: a short job's hours are not shown
    as 0), and ``0`` for nothing."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    if abs(value) >= 0.01:
        return f"{value:,.2f}"
    decimals = min(12, 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def line(row: UsageRowView) -> Line:
    """``row`` for the table."""
    return Line(
        key=row.key,
        user=row.user or "",
        queue=row.queue or "",
        allocations=row.allocations,
        gpu_hours=figure(row.gpu_hours),
        cpu_hours=figure(row.cpu_hours),
        memory_gib_hours=figure(row.memory_gib_hours),
        cost=figure(row.cost),
        saved=figure(row.saved),
    )


def _report(
    visitor: Visitor, *, by: str, since: str, until: str, user: str
) -> tuple[UsageView | None, Problem | None, int]:
    """The API's report, or why there is none and the status to answer with."""
    grouping = _BY.get(by)
    if grouping is None:
        fix = f"choose one of {', '.join(GROUPS)}"
        return None, Problem(field="by", message=f"{by[:40]!r} is not a grouping", fix=fix), 422
    try:
        view = visitor.client.usage(
            by=grouping,
            since=since.strip() or None,
            until=until.strip() or None,
            user=user.strip() or None,
        )
    except ClientError as error:
        if error.status not in SHOWN_REFUSALS:
            raise  # the console's error page: the API failed, or could not be reached
        problem = Problem(field=error.field or "", message=error.detail, fix=error.fix or "")
        return None, problem, error.status
    return view, None, 200


def _context(
    visitor: Visitor, *, by: str | None, since: str | None, until: str, user: str
) -> tuple[dict[str, Any], int]:
    grouping = by if by is not None else ("user" if visitor.is_admin else "job")
    period = DEFAULT_SINCE if since is None else since
    view, problem, status = _report(visitor, by=grouping, since=period, until=until, user=user)
    context = {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "page": "usage",
        "everyone": visitor.is_admin and not user.strip(),
        "is_admin": visitor.is_admin,
        "by": grouping,
        "since": period,
        "until": until,
        "asked_user": user,
        "groups": GROUPS,
        "periods": PERIODS,
        "problem": problem,
        "view": view,
        "lines": [] if view is None else [line(row) for row in view.items],
        "total": None if view is None else line(view.total),
    }
    return context, status


@router.get("/usage")
def usage_page(
    request: Request,
    visitor: Signed,
    by: str | None = None,
    since: str | None = None,
    until: str = "",
    user: str = "",
) -> Response:
    """The usage page (``since`` left empty: from the first allocation; ``until`` left
    empty: up to now)."""
    context, status = _context(visitor, by=by, since=since, until=until, user=user)
    return console_of(request).templates.TemplateResponse(
        request, "usage.html", context, status_code=status
    )
