"""How the API pictures stored jobs without reading every task of a large one.

Guarantees: a page of job summaries costs two grouped queries over its tasks, whatever
their number (task counts by role and phase; distinct nodes of the tasks that hold
resources); no task row is loaded for a summary. A job's own view loads its first
``TASKS_INLINE`` tasks and says how many more there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from phalanx.control.controllers.priorities import JobPriority
from phalanx.control.store import Session
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.models import JobRow, TaskRow
from phalanx.control.submit import TASKS_INLINE, requested
from phalanx.domain.job import HOLDS_RESOURCES, JobPhase
from phalanx.domain.resources import Resources
from phalanx.spec.quantity import resources_of
from phalanx.wire.views import (
    JobPriorityView,
    JobSummaryView,
    JobView,
    PriorityFactorsView,
    TaskView,
)

_HOLDING: Final = sorted(phase.value for phase in HOLDS_RESOURCES)
_WAITING: Final = frozenset({JobPhase.PENDING.value, JobPhase.QUEUED.value})
#: no job has a place in line (a view built where the controller's is not at hand)
NO_PLACES: Final[Mapping[str, int]] = {}
#: no job has a multifactor priority (the same)
NO_PRIORITIES: Final[Mapping[str, JobPriority]] = {}


@dataclass(slots=True)
class Tally:
    """What one job's tasks add up to."""

    counts: dict[str, int] = field(default_factory=dict)  # task phase -> tasks
    held: dict[str, int] = field(default_factory=dict)  # role -> tasks holding resources
    nodes: set[str] = field(default_factory=set)


def tallies(session: Session, job_ids: Sequence[int]) -> dict[int, Tally]:
    """Each job's tally, by job id: two grouped queries for all of ``job_ids``."""
    found: dict[int, Tally] = {job_id: Tally() for job_id in job_ids}
    if not job_ids:
        return found
    for job_id, role, phase, count in stored_jobs.task_counts(session, job_ids):
        tally = found[job_id]
        tally.counts[phase] = tally.counts.get(phase, 0) + count
        if phase in _HOLDING:
            tally.held[role] = tally.held.get(role, 0) + count
    for job_id, node in stored_jobs.task_nodes(session, job_ids, _HOLDING):
        found[job_id].nodes.add(node)
    return found


def job_summaries(
    session: Session, rows: Sequence[JobRow], places: Mapping[str, int] = NO_PLACES
) -> list[JobSummaryView]:
    """The summaries of ``rows``, in order; a waiting job's ``queue_position`` from
    ``places`` (the controller's view: ``ClusterView.positions``)."""
    counted = tallies(session, [row.id for row in rows])
    return [JobSummaryView(**_summary_fields(row, counted[row.id], places)) for row in rows]


def job_view(
    session: Session,
    row: JobRow,
    *,
    with_document: bool = False,
    places: Mapping[str, int] = NO_PLACES,
    priorities: Mapping[str, JobPriority] = NO_PRIORITIES,
) -> JobView:
    """One job with its first ``TASKS_INLINE`` tasks (``places`` as for ``job_summaries``)
    and, while the stored job waits, its multifactor priority from ``priorities`` (the
    controller's view: ``ClusterView.priorities``)."""
    tally = tallies(session, [row.id])[row.id]
    tasks = stored_jobs.tasks(session, row.id, limit=TASKS_INLINE)
    ranked = priorities.get(row.name) if _waits(row) else None
    return JobView(
        **_summary_fields(row, tally, places),
        tasks=[task_view(task) for task in tasks],
        tasks_omitted=max(0, sum(tally.counts.values()) - len(tasks)),
        document=row.document if with_document else None,
        progress=row.progress,
        priority=None if ranked is None else priority_view(ranked),
    )


def priority_view(found: JobPriority) -> JobPriorityView:
    """The API's picture of one job's multifactor priority."""
    w = found.weights
    return JobPriorityView(
        factors=PriorityFactorsView(
            age=found.age, fair_share=found.fair_share, size=found.size, priority=found.priority
        ),
        weights=PriorityFactorsView(
            age=w["age"], fair_share=w["fairShare"], size=w["size"], priority=w["priority"]
        ),
        total=found.total,
        time=found.time,
    )


def task_view(row: TaskRow) -> TaskView:
    """The API's picture of a stored task."""
    return TaskView(
        name=row.name,
        role=row.role,
        index=row.index,
        phase=row.phase,
        node=row.node,
        gpus=list(row.gpus or []),
        exit_code=row.exit_code,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


def _waits(row: JobRow) -> bool:
    """Whether the stored job waits to start: what the controller's view says of a job
    that has started or ended since is stale, never shown."""
    return row.phase in _WAITING and not row.cancel_requested


def _summary_fields(row: JobRow, tally: Tally, places: Mapping[str, int]) -> dict[str, Any]:
    waiting = _waits(row)
    return {
        "name": row.name,
        "queue": row.queue,
        "user": row.user,
        "phase": row.phase,
        "reason": row.reason,
        "message": row.message,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "attempts": row.attempts,
        "preemptions": row.preemptions,
        "cancel_requested": row.cancel_requested,
        "delete_requested": row.delete_requested,
        "requests": requested(row.document),
        "task_counts": tally.counts,
        "allocated": _allocated(row.document, tally.held),
        "nodes": sorted(tally.nodes),
        "queue_position": places.get(row.name) if waiting else None,
    }


def _allocated(document: dict[str, Any], held: dict[str, int]) -> dict[str, float]:
    """What ``held[role]`` replicas of each role ask for together (the stored document
    is the validated canonical form: its roles are read directly)."""
    total = Resources()
    for role in document["spec"]["roles"]:
        if held.get(role["name"]):
            total = total + resources_of(role["resources"]).scaled(held[role["name"]])
    return dict(total.items())
