"""enqueue: admit pending jobs (Pending -> Queued) whose minimum their queue and the cluster can hold.

A job is admitted when the plugins' ``job_enqueueable`` vote permits it (its queue's
capability can hold its minimum) and the cluster could make room for that minimum in
one of four ways, checked in this order:

1. room in the budget: ``overcommitFactor`` (Volcano's default 1.2) times schedulable
   capacity, less the work of non-overcommit queues that is running or admitted (in
   this session or an earlier one, and not yet placed);
2. reclaim: its queue and every ancestor stay within their deserved share with it;
3. a reservation: it is starving (backfill will reserve room for it);
4. preemption: lower-priority, preemptible work of its own queue covers its minimum.

Work of overcommit (over-issued) queues does not use the budget: it is first to be
reclaimed; nor does the growth of elastic jobs, which any waiting gang takes back; nor does a starving job, whose room its reservation makes. Any number of jobs
of one queue may be admitted in one session.

Refusals stand while nothing makes room (DESIGN section 5: an unschedulable job whose
inputs have not changed is not evaluated again). On a snapshot kept across sessions
(``Snapshot.epoch`` counts the changes that can make room), a job refused in an earlier
session is passed over, keeping its reason, until the epoch moves or its starvation
changes: new jobs only take room, so the verdict would be the same. The refused job's
reason text is the one it was given then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import JobPhase
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.wording import most_free, speak, unschedulable_note
from phalanx.engine.placement.eviction.growth import lent_total
from phalanx.engine.placement.eviction.victims import fits_deserved, preemption_covers
from phalanx.engine.snapshot import EPSILON, JobInfo, Snapshot, Vector


class EnqueueAction(Action):
    """Admits jobs in queue order, then job order."""

    name = "enqueue"
    accepted_args = frozenset({"overcommitFactor"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.overcommit_factor = self.number("overcommitFactor", 1.2, minimum=1.0)

    def execute(self, session: Session) -> None:
        factor = self.overcommit_factor
        snapshot = session.snapshot
        promised = _charge_earlier_admissions(session)  # admitted, not started yet
        budget = snapshot.total * factor - promised
        for leaf in snapshot.leaf_queues():
            if not leaf.spec.overcommit:
                budget -= leaf.allocated
        if snapshot.elastic:  # growth is lent: any waiting gang may take it back
            budget += lent_total(snapshot.elastic.values(), len(snapshot.dims))
        standing = session.kept.get(_refusals, Lifetime.EPOCH)
        # Within a session budgets only shrink and queues (and their users' holdings) only
        # fill, so a job refused for a given (queue, user, minimum, priority, starving)
        # means every later such job is refused. The user is in the key because a plugin
        # may refuse by what the user holds (userlimits): another user's job may still go.
        refused: dict[tuple[object, ...], Reason] = {}
        for job in _pending_in_order(session, standing):
            invalid = session.points.job_valid(job)
            if invalid is not None:
                session.record_reason(job, Reason(code=ReasonCode.INVALID, message=invalid))
                standing[job.name] = (False, session.reasons[job.name])
                continue
            minimum = job.min_request()
            key = (
                job.queue.name,
                job.user,
                minimum.tobytes(),
                job.priority,
                session.points.job_starving(job),
            )
            known = refused.get(key)
            if known is not None:
                session.record_reason(job, known)
                standing[job.name] = (bool(key[4]), known)
                continue
            if not session.points.job_enqueueable(job):
                refused[key] = session.reasons[job.name]  # the rejecting plugin recorded why
                standing[job.name] = (bool(key[4]), refused[key])
                continue
            short = minimum > budget + EPSILON
            if short.any() and not _room_can_be_made(session, job, minimum, budget):
                _record_no_room(session, job, minimum, short, promised)
                refused[key] = session.reasons[job.name]
                standing[job.name] = (bool(key[4]), refused[key])
                continue
            session.admitted.append(job.name)
            if _uses_budget(session, job):
                budget -= minimum
                promised = promised + minimum
            for queue in job.queue.ancestors:
                queue.inqueue += minimum


def _charge_earlier_admissions(session: Session) -> Vector:
    """Count jobs admitted earlier and still unplaced as their queues' ``inqueue``.

    Without this, each session would hand out the whole budget (and each queue its whole
    capability) again on top of the jobs admitted before that still wait. Returns what
    of it the cluster budget must cover (see ``_uses_budget``).
    """
    charged = np.zeros(len(session.snapshot.dims))
    for job in session.waiting:
        if job.phase is not JobPhase.QUEUED or job.ready_count >= job.min_available:
            continue
        waiting = np.maximum(job.min_request() - job.allocated, 0.0)
        for queue in job.queue.ancestors:
            queue.inqueue += waiting
        if _uses_budget(session, job):
            charged += waiting
    return charged


def _uses_budget(session: Session, job: JobInfo) -> bool:
    """Whether an admitted job's minimum is charged to the cluster budget.

    Overcommit queues' work is not (it is first to be reclaimed), nor is a starving
    job's: its room comes from its reservation, and charging it would stop every other
    admission - and with it backfill - until it starts.
    """
    return not job.queue.spec.overcommit and not session.points.job_starving(job)


def _room_can_be_made(session: Session, job: JobInfo, minimum: Vector, budget: Vector) -> bool:
    """Reclaim, a reservation or preemption could make room for ``minimum``: preemption
    needs to free only what the budget lacks (a job asking more memory than its victims
    hold still fits when the cluster has that memory free)."""
    return (
        fits_deserved(job.queue.ancestors[:-1], minimum)
        or session.points.job_starving(job)
        or preemption_covers(job, np.maximum(minimum - np.maximum(budget, 0.0), 0.0))
    )


def _record_no_room(
    session: Session, job: JobInfo, minimum: Vector, short: NDArray[np.bool_], promised: Vector
) -> None:
    """What the job needs, in the units it was written in, against what is free: on the
    cluster, on the best node, promised to admitted jobs, and held by unschedulable nodes."""
    snapshot = session.snapshot
    dim = int(np.argmax(np.where(short, minimum / np.maximum(snapshot.total, EPSILON), -1.0)))
    free = np.maximum(snapshot.total - (snapshot.used * snapshot.schedulable[:, None]).sum(0), 0)
    only = np.where(short, 1.0, 0.0)
    tasks = job.min_available
    said = [
        f"not admitted: needs {speak(snapshot, minimum)} for its minimum of {tasks} "
        f"task{'' if tasks == 1 else 's'}; the cluster has {speak(snapshot, free, dims=only)} "
        f"free (of {speak(snapshot, snapshot.total, dims=only)})"
    ]
    best = most_free(snapshot, dim)
    if best is not None and best[1] > EPSILON:
        row, one = np.zeros(len(snapshot.dims)), np.zeros(len(snapshot.dims))
        row[dim], one[dim] = best[1], 1.0
        said.append(f"the most free on one node is {speak(snapshot, row, dims=one)} ({best[0]})")
    waiting = promised * only
    if (waiting > EPSILON).any():
        said.append(f"{speak(snapshot, waiting)} promised to admitted jobs not yet started")
    off = unschedulable_note(snapshot, minimum * only)
    if off is not None:
        said.append(off)
    said.append(_over_deserved(session, job, minimum))
    fix = "uncordon nodes, or wait: " if off is not None else ""
    said.append(f"{fix}it is admitted when work finishes, or once it starves (reservation)")
    session.record_reason(
        job,
        Reason(
            code=ReasonCode.NOT_ADMITTED,
            message="; ".join(said),
            resource=snapshot.dims[dim],
            queue=job.queue.name,
        ),
    )


def _over_deserved(session: Session, job: JobInfo, minimum: Vector) -> str:
    """Why reclaim cannot make room: the first queue up the tree whose deserved share the
    job's minimum would pass, with that share and what the queue holds."""
    asked = minimum > 0
    for queue in job.queue.ancestors[:-1]:
        held = queue.allocated + queue.inqueue
        over = (held + minimum > queue.deserved + EPSILON) & asked
        if over.any():
            has = (
                f" and holds {speak(session.snapshot, held, dims=over)}" if held[over].any() else ""
            )
            return (
                f"queue {session.queue_label(queue)} deserves "
                f"{speak(session.snapshot, queue.deserved, dims=over)}{has}, so reclaim "
                "cannot make room for it"
            )
    return "its queue is at its deserved share"


#: Refusals still standing, per job: (starving when refused, the reason given).
_Standing = dict[str, tuple[bool, Reason]]


def _refusals(snapshot: Snapshot) -> _Standing:
    """Refusals of earlier sessions on ``snapshot`` that still stand: kept while
    ``Snapshot.epoch`` is unchanged (an ``EPOCH`` slot of the kept state), none after it
    moved or where nobody keeps the epoch. ``execute`` adds this session's refusals."""
    return {}


def _pending_in_order(session: Session, standing: _Standing) -> list[JobInfo]:
    """Pending jobs to evaluate, in line order; a job whose refusal stands (and whose
    starvation has not changed since) is given its reason again and left out."""
    jobs = []
    starving = session.points.job_starving
    for job in session.waiting:
        if job.phase is not JobPhase.PENDING:
            continue
        refusal = standing.get(job.name)
        if refusal is not None:
            if refusal[0] == starving(job):
                session.record_reason(job, refusal[1])
                continue
            del standing[job.name]
        jobs.append(job)
    return session.ranked(jobs)
