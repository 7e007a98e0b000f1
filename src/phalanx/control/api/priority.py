"""``/api/v1/priority``: each waiting job's multifactor priority, as Slurm's ``sprio``.

Read from the controller's view (``ClusterView.priorities``), as of its last tick: no
database read and no engine call. A user sees their own jobs only, as in the jobs list;
an admin sees everyone's, or one user's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from phalanx.control.api.deps import Caller, TheController, errors
from phalanx.control.api.job_views import priority_view
from phalanx.wire.priority import PriorityListView, WaitingPriorityView

router = APIRouter(prefix="/api/v1/priority", tags=["priority"], responses=errors(401, 422))


@router.get("", response_model=PriorityListView)
def list_priorities(
    caller: Caller,
    controller: TheController,
    queue: Annotated[str | None, Query(description="only jobs of this queue")] = None,
    user: Annotated[
        str | None,
        Query(description="only this user's jobs (admins; a user always sees their own only)"),
    ] = None,
) -> PriorityListView:
    """The jobs waiting to start (Pending or Queued) as of the scheduler's last tick, by
    queue, highest priority first (then oldest first), each with its four factors (age,
    fair-share, size, priority), their weights and the weighted sum. Empty, with
    ``fairshare`` false, when the server's scheduler has no fairshare plugin. Users see
    their own jobs; admins see all."""
    view = controller.view
    owner = user if caller.is_admin else caller.name
    shown = [
        found
        for found in view.priorities.values()
        if (owner is None or found.user == owner) and (queue is None or found.queue == queue)
    ]
    shown.sort(key=lambda p: (p.queue, -p.total, p.created_at, p.job))
    items = [
        WaitingPriorityView(
            name=p.job,
            queue=p.queue,
            user=p.user,
            created_at=p.created_at,
            **priority_view(p).model_dump(),
        )
        for p in shown
    ]
    return PriorityListView(
        fairshare=view.fairshare, time=view.time if view.fairshare else None, items=items
    )
