"""What ``GET /api/v1/usage`` returns: accounting rows (a read schema: unknown fields
are ignored)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import Field

from phalanx.wire.views import View

#: What a usage report's rows are.
UsageBy = Literal["job", "user", "queue", "allocation"]


class UsageRowView(View):
    """Resources held over the report's window, priced. ``job``, ``user`` and ``queue``
    are set where the row's allocations all agree; ``task`` .. ``ended_by`` only on a
    report by allocation (``end`` None: still held)."""

    key: str
    job: str | None = None
    user: str | None = None
    queue: str | None = None
    allocations: int = 0
    hours: float = 0.0
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    memory_gib_hours: float = 0.0
    cost: float = 0.0
    saved: float = 0.0
    task: str | None = None
    node: str | None = None
    price_class: str | None = None
    reclaimable: bool | None = None
    start: float | None = None
    end: float | None = None
    ended_by: str | None = None
    resources: dict[str, float] = Field(default_factory=dict)


class UsageView(View):
    """A usage report: its window (``since`` None: from the first allocation; ``until``
    the report's ``now`` unless given), what its rows are, the rows and their total."""

    since: float | None = None
    until: float
    now: float
    by: UsageBy
    user: str | None = None
    queue: str | None = None
    items: list[UsageRowView]
    total: UsageRowView


_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_RELATIVE: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
TIME_FIX: Final = (
    "give an ISO date or time (2025-01-31, 2025-01-31T08:00:00Z; UTC unless it names "
    "a zone), seconds since the epoch, or a time ago such as 7d, 12h, 30m"
)


def parse_time(text: str, *, now: float) -> float:
    """``text`` as seconds since the epoch: an ISO 8601 date or date-time (UTC unless
    it says otherwise), a number of seconds since the epoch, or a span ago (``7d``,
    ``12h``, ``30m``, ``90s``, ``2w``) before ``now``. ``ValueError`` saying what is
    wrong otherwise (the caller names the field, with ``TIME_FIX``)."""
    given = text.strip()
    relative = _RELATIVE.fullmatch(given)
    if relative:
        return now - float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        seconds = float(given)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"{given[:40]!r} is not a time")
        return seconds
    try:
        moment = datetime.fromisoformat(given.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{given[:40]!r} is not a time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
