"""What ``GET /api/v1/priority`` returns: the waiting jobs' multifactor priorities, as
Slurm's ``sprio`` lists them (a read schema: unknown fields are ignored)."""

from __future__ import annotations

from phalanx.wire.views import JobPriorityView, View


class WaitingPriorityView(JobPriorityView):
    """One waiting job's factors, weights and their weighted sum."""

    name: str
    queue: str
    user: str
    created_at: float


class PriorityListView(View):
    """The waiting jobs the caller may see, by queue (in name order), then highest
    ``total`` first, then oldest first. ``fairshare`` False: the server's scheduler has
    no fairshare plugin, and no job has these factors (``items`` is empty). ``time``:
    when the controller computed them (None: no tick yet)."""

    fairshare: bool
    time: float | None = None
    items: list[WaitingPriorityView]
