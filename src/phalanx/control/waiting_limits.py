"""The waiting-jobs limit of a queue, checked at submit: ``check_waiting``.

A Queue's ``limits.waitingJobs`` (or a user's own, in ``userLimits``) is the most jobs a
user may have waiting in it: submitted, not running yet and not ended (Pending or
Queued), as Slurm's MaxSubmitJobsPerUser. A job that would pass it is refused with a
409 naming the field and what to do; jobs of one batch count in submission order, so
a batch fills the limit and the rest of it is refused. Only the jobs API refuses: jobs
that the server makes itself (pipeline steps, service replicas, tuning trials) are not
counted against it, nor refused. The simulator has no submit: there the limit does not
exist (running-job and resource limits, and budgets, are the engine's, in both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phalanx.control.errors import ApiError
from phalanx.control.store import Session
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import jobs as stored_jobs
from phalanx.spec.job import JobDocument


def check_waiting(
    session: Session, resolved: Sequence[JobDocument | ApiError]
) -> list[JobDocument | ApiError]:
    """``resolved`` with each job that would pass its user's waiting-jobs limit in its
    queue replaced by its refusal. One query for the queues, one for the counts."""
    documents = [d for d in resolved if isinstance(d, JobDocument)]
    if not documents:
        return list(resolved)
    found = stored_cluster.queue_documents(session, sorted({d.spec.queue for d in documents}))
    limits: dict[tuple[str, str], tuple[int, str]] = {}
    for document in documents:
        key = (document.spec.queue, document.spec.user)
        queue = found.get(key[0])
        limit = None if queue is None else _limit(queue[0], key[1])
        if limit is not None:
            limits[key] = limit
    if not limits:
        return list(resolved)
    waiting = stored_jobs.waiting_per_user(session, limits)
    checked: list[JobDocument | ApiError] = []
    for item in resolved:
        if isinstance(item, JobDocument):
            key = (item.spec.queue, item.spec.user)
            if key in limits:
                count = waiting.get(key, 0)
                if count >= limits[key][0]:
                    checked.append(_refusal(key, count, *limits[key]))
                    continue
                waiting[key] = count + 1
        checked.append(item)
    return checked


def _limit(queue: Mapping[str, Any], user: str) -> tuple[int, str] | None:
    """``user``'s waiting-jobs limit in the stored (canonical) queue document, with the
    field it comes from; None: no limit."""
    spec = queue.get("spec", {})
    own = spec.get("userLimits", {}).get(user, {})
    if own.get("waitingJobs") is not None:
        return int(own["waitingJobs"]), f"userLimits.{user}.waitingJobs"
    shared = spec.get("limits", {}).get("waitingJobs")
    return None if shared is None else (int(shared), "limits.waitingJobs")


def _refusal(key: tuple[str, str], count: int, limit: int, field: str) -> ApiError:
    queue, user = key
    return ApiError(
        409,
        f"user {user} has {count} job{'' if count == 1 else 's'} waiting in queue {queue}, "
        f"its limit ({field} {limit} of queue {queue})",
        field="spec.queue",
        fix=f"wait for one of them to start, cancel a waiting one (phalanx get jobs "
        f"--queue {queue}; phalanx delete job NAME), or ask an admin to raise {field}",
    )
