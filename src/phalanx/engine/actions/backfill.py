"""backfill: Slurm-style reservations for starving jobs, and backfilling around them.

When the session opens, each starving job (sla plugin) that is not running gets a
reservation: the earliest time its gang fits, computed from when running tasks end
(start + walltime, else runtime estimate; tasks with neither never end), and the
nodes it will use then. Until that time, the part of those nodes that will not be
freed by it is withheld from every other job in allocate (a job held to one GPU type
is planned on one type). At its turn, backfill
places jobs known to end before a reservation starts on the withheld room. So a
reserved job starts no later than its reservation (when walltimes hold), and jobs
that respect it still run meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import JobPhase
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Hold, Session
from phalanx.engine.placement.gputypes import asks_gpus, typing_of
from phalanx.engine.placement.jobs import try_job
from phalanx.engine.snapshot import EPSILON, ON_NODE, JobInfo, TaskInfo, TaskStatus


class BackfillAction(Action):
    """Reserve for starving jobs at open; backfill short jobs into reserved room."""

    name = "backfill"
    accepted_args = frozenset({"maxReservations"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.max_reservations = int(self.number("maxReservations", 4))

    def open(self, session: Session) -> None:
        limit = self.max_reservations
        starving = [
            j
            for j in session.waiting
            if (j.phase is not JobPhase.PENDING or not session.has_enqueue)
            and j.ready_count < j.min_available
            and j.pending_count
            and session.points.job_starving(j)
        ]
        for job in session.ranked(starving)[:limit]:
            hold = plan_hold(session, job)
            if hold is not None:
                session.holds.append(hold)

    def execute(self, session: Session) -> None:
        if not session.holds:
            return
        for job in session.ranked(_backfill_candidates(session)):
            ends_by = session.now + _duration(job)
            withheld = session.withheld_for(job, ends_by=ends_by)
            if try_job(session, job, withheld=withheld, allow_pipeline=False):
                session.explain(
                    f"backfill: {job.name} runs on reserved room; it ends by t={ends_by:g}s"
                )


def _duration(job: JobInfo) -> float:
    spec = job.spec
    if spec.walltime is not None:
        return spec.walltime
    return spec.runtime_estimate if spec.runtime_estimate is not None else np.inf


def _backfill_candidates(session: Session) -> list[JobInfo]:
    held = {h.job for h in session.holds}
    return [
        j
        for j in session.waiting
        if j.name not in held
        and j.ready_count < j.min_available
        and j.pending_count
        and session.is_admitted(j)
        and np.isfinite(_duration(j))
        and session.points.job_valid(j) is None
    ]


def _end_time(task: TaskInfo, now: float) -> float:
    if task.status is TaskStatus.RELEASING:
        return now
    duration = _duration(task.job)
    start = task.start_time if task.start_time is not None else now
    return max(now, start + duration)


def plan_hold(session: Session, job: JobInfo) -> Hold | None:
    """The earliest start of ``job``'s gang given when running tasks end, and what to withhold."""
    snap = session.snapshot
    tasks = sorted(job.pending_tasks(), key=lambda t: (t.role.index, t.index))[
        : job.min_available - job.ready_count
    ]
    if not tasks:
        return None
    running = [
        t
        for other in snap.jobs.values()
        for t in other.tasks
        if t.status in ON_NODE and t.node >= 0
    ]
    ends = np.array([_end_time(t, session.now) for t in running])
    order = np.argsort(ends, kind="stable")
    base = snap.capacity - snap.used
    for other in session.holds:
        base = base - other.amounts
    times = np.unique(ends[np.isfinite(ends)])
    times = np.concatenate(([session.now], times[times > session.now]))
    nodes_of = np.array([t.node for t in running], dtype=np.intp)
    rows = np.array([t.request for t in running]) if running else np.zeros((0, len(snap.dims)))

    def free_at(when: float) -> NDArray[np.float64]:
        done = order[: int(np.searchsorted(ends[order], when, side="right"))]
        free = base.copy()
        np.add.at(free, nodes_of[done], rows[done])
        return free

    lo, hi = 0, len(times) - 1
    if _assign(session, tasks, free_at(times[hi])) is None:
        return None  # never fits, even when everything with a known end has ended
    while lo < hi:
        mid = (lo + hi) // 2
        if _assign(session, tasks, free_at(times[mid])) is None:
            lo = mid + 1
        else:
            hi = mid
    start = float(times[lo])
    later = free_at(start)
    amounts = _assign(session, tasks, later)
    assert amounts is not None
    released = later - base
    now_free = np.maximum(base, 0.0)
    withheld = np.clip(amounts - released, 0.0, now_free)
    chosen = tuple(int(i) for i in np.flatnonzero(amounts.sum(axis=1) > 0))
    return Hold(job=job.name, start_time=start, nodes=chosen, amounts=withheld)


def _assign(
    session: Session, tasks: Sequence[TaskInfo], free: NDArray[np.float64]
) -> NDArray[np.float64] | None:
    """Per-node amounts that fit every task on ``free`` (fullest nodes first), or None.
    A job held to one GPU type (``gputypes``) has its GPU tasks on one type: its own
    once pinned, else the first a plugin wishes for (``gpu_types``), else by name, where
    they all fit."""
    typing = typing_of(session, tasks[0].job)
    if typing is None:
        return _assign_within(session, tasks, free, None)
    if typing.pinned is not None:
        kinds: Sequence[int] = [typing.pinned]
    else:
        kinds = typing.preferred or range(len(typing.index.names))
    for kind in kinds:
        amounts = _assign_within(session, tasks, free, typing.index.mask(kind))
        if amounts is not None:
            return amounts
    return None


def _assign_within(
    session: Session,
    tasks: Sequence[TaskInfo],
    free: NDArray[np.float64],
    typed: NDArray[np.bool_] | None,
) -> NDArray[np.float64] | None:
    """``_assign`` with the tasks that ask for GPUs on the nodes of ``typed`` only."""
    free = free.copy()
    taken = np.zeros_like(free)
    for task in tasks:
        request = task.request
        need = np.flatnonzero(request > 0)
        mask, _ = session.static_mask(task.role)
        if typed is not None and asks_gpus(task.role):
            mask = mask & typed
        fits = mask & (free[:, need] + EPSILON >= request[need]).all(axis=1)
        if not fits.any():
            return None
        candidates = np.flatnonzero(fits)
        node = (
            int(candidates[np.argmax(taken[candidates].sum(axis=1) > 0)])
            if taken.any()
            else int(candidates[0])
        )
        free[node] -= request
        taken[node] += request
    return taken
