"""``/api/v1/usage``: what jobs held, and what it cost (sacct/sreport for phalanx).

Read from the accounting ledger (``store.usage``): one allocation per placement of a
task, from its bind to when it left its node, at the lifecycle's own times. A user
sees their own usage only (asking for another's answers 403); an admin sees everyone's.
Costs use the server's price sheet (``phalanx up --prices``).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request

from phalanx.control.accounting import By, Usage, report
from phalanx.control.api.deps import Caller, DbSession, errors
from phalanx.control.errors import ApiError
from phalanx.control.store import usage as ledger
from phalanx.domain.prices import PriceSheet
from phalanx.wire.usage import TIME_FIX, UsageRowView, UsageView, parse_time

router = APIRouter(prefix="/api/v1/usage", tags=["usage"], responses=errors(401, 422))

_TIME = (
    "ISO 8601 date or date-time (UTC unless it names a zone), seconds since the epoch, "
    "or a span ago (7d, 12h, 30m)"
)


@router.get("", response_model=UsageView, responses=errors(403))
def get_usage(
    caller: Caller,
    session: DbSession,
    request: Request,
    user: Annotated[
        str | None,
        Query(description="only this user's (default: the caller's, or everyone's for an admin)"),
    ] = None,
    queue: Annotated[str | None, Query(description="only jobs of this queue")] = None,
    job: Annotated[str | None, Query(description="only this job")] = None,
    since: Annotated[
        str | None, Query(description=f"window start: {_TIME}; default: the beginning")
    ] = None,
    until: Annotated[str | None, Query(description=f"window end: {_TIME}; default: now")] = None,
    by: Annotated[By, Query(description="rows per job, user, queue or allocation")] = By.JOB,
) -> UsageView:
    """GPU-, CPU(core)- and memory(GiB)-hours held in the window, their cost and what
    elastic jobs saved on reclaimable nodes, by job, user, queue or allocation, with the
    total. Allocations are clipped to the window; one still held counts up to now."""
    now = time.time()
    if user is not None and user != caller.name and not caller.is_admin:
        raise ApiError(
            403,
            f"only an admin may see another user's usage ({user!r})",
            field="user",
            fix="leave user out to see your own usage",
        )
    if user is None and not caller.is_admin:
        user = caller.name
    start, end = _time(since, "since", now), _time(until, "until", now)
    if start is not None and end is not None and end <= start:
        raise ApiError(
            422,
            "until is not after since",
            field="until",
            fix="give an until later than since (or leave it out: now)",
        )
    sheet: PriceSheet = getattr(request.app.state, "price_sheet", None) or PriceSheet()
    found = ledger.overlapping(session, since=start, until=end, user=user, queue=queue, job=job)
    rows, total = report(found, sheet, by=by, since=start, until=end, now=now)
    return UsageView(
        since=start,
        until=now if end is None else end,
        now=now,
        by=by.value,
        user=user,
        queue=queue,
        items=[_view(row) for row in rows],
        total=_view(total),
    )


def _time(text: str | None, field: str, now: float) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        return parse_time(text, now=now)
    except ValueError as error:
        raise ApiError(422, f"{field}: {error}", field=field, fix=TIME_FIX) from None


def _view(row: Usage) -> UsageRowView:
    return UsageRowView.model_validate(row, from_attributes=True)
