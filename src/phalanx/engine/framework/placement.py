"""Vectorized placement of identical tasks, and the reasons when they do not fit.

Tasks of one role form an equivalence class: predicates are evaluated once over every
node, scores once over the candidates, and after each placement only the chosen node
is re-checked (and re-scored when every scorer is node-local).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.resources import format_amount
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import Statement
from phalanx.engine.snapshot import EPSILON, JobInfo, TaskInfo, Vector

NEG = -np.inf


@dataclass(frozen=True, slots=True)
class Outcome:
    """How many tasks were allocated and pipelined, and why the rest were not."""

    allocated: int
    pipelined: int
    reason: Reason | None


class ClassPlacer:
    """Places tasks of one role on the best nodes, one at a time, updating one node per step."""

    def __init__(self, session: Session, sample: TaskInfo, withheld: Vector | None) -> None:
        snap = session.snapshot
        self.session = session
        self.request = sample.role.request
        self.need = np.flatnonzero(self.request > 0)
        mask, self.excluded = session.static_mask(sample.role)
        self.candidates: NDArray[np.intp] = np.flatnonzero(mask)
        cand = self.candidates
        self.now_free = snap.capacity[cand] - snap.used[cand]
        if withheld is not None:
            self.now_free -= withheld[cand]
            self.withheld = True
        else:
            self.withheld = False
        self.future_free = self.now_free + snap.releasing[cand] - snap.pipelined[cand]
        self.slots = snap.max_tasks[cand] - snap.task_count[cand]
        self.node_local = session.points.node_score.node_local
        self.scores = self._score(sample, cand)
        self.now_scores = np.where(
            self._fits(self.now_free) & self._fits(self.future_free), self.scores, NEG
        )
        self.future_scores = np.where(self._fits(self.future_free), self.scores, NEG)

    def _fits(self, free: NDArray[np.float64]) -> NDArray[np.bool_]:
        need = self.need
        ok = (
            (free[:, need] + EPSILON >= self.request[need]).all(axis=1)
            if need.size
            else np.ones(len(free), bool)
        )
        return ok & (self.slots >= 1)

    def _score(self, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        if not self.session.points.node_score or nodes.size == 0:
            return np.zeros(nodes.size)
        return self.session.points.node_score(task, nodes)

    def place(self, stmt: Statement, task: TaskInfo, *, allow_pipeline: bool) -> str | None:
        """Allocate (or pipeline) ``task``; returns "allocated", "pipelined" or None."""
        if self.candidates.size == 0:
            return None
        k = int(np.argmax(self.now_scores))
        if self.now_scores[k] > NEG:
            stmt.allocate(task, int(self.candidates[k]))
            self.now_free[k] -= self.request
            self.future_free[k] -= self.request
            self.slots[k] -= 1
            self._refresh(task, k)
            return "allocated"
        if not allow_pipeline:
            return None
        k = int(np.argmax(self.future_scores))
        if self.future_scores[k] == NEG:
            return None
        stmt.pipeline(task, int(self.candidates[k]))
        self.future_free[k] -= self.request
        self._refresh(task, k)
        return "pipelined"

    def _refresh(self, task: TaskInfo, k: int) -> None:
        if self.node_local:
            self.scores[k] = self._score(task, self.candidates[k : k + 1])[0]
        else:
            self.scores = self._score(task, self.candidates)
        row_now = self.now_free[k : k + 1]
        row_future = self.future_free[k : k + 1]
        fits_future = bool(self._fits_row(row_future, k))
        self.now_scores[k] = self.scores[k] if fits_future and self._fits_row(row_now, k) else NEG
        self.future_scores[k] = self.scores[k] if fits_future else NEG
        if not self.node_local:
            self.now_scores = np.where(np.isfinite(self.now_scores), self.scores, NEG)
            self.future_scores = np.where(np.isfinite(self.future_scores), self.scores, NEG)

    def _fits_row(self, row: NDArray[np.float64], k: int) -> bool:
        need = self.need
        return bool((row[0, need] + EPSILON >= self.request[need]).all()) and self.slots[k] >= 1

    def shortage_reason(self, task: TaskInfo) -> Reason:
        """Why no candidate node can take ``task``: counts per short resource, the closest node."""
        snap = self.session.snapshot
        role = task.role
        what = f"task {role.name} ({role.resources.describe()})"
        total = len(snap.nodes)
        if self.candidates.size == 0:
            excluded = (
                ", ".join(f"{n} by {p}" for p, n in sorted(self.excluded.items()))
                or "all unschedulable"
            )
            return Reason(
                code=ReasonCode.NO_MATCHING_NODE,
                message=f"0/{total} nodes match {what}: {excluded}; fix: relax the role's "
                "nodeSelector/affinity, add tolerations, or uncordon nodes",
            )
        free = self.future_free
        short = np.maximum(self.request - free, 0.0)
        short[:, self.request <= 0] = 0.0
        per_dim = {snap.dims[d]: int(np.count_nonzero(short[:, d] > EPSILON)) for d in self.need}
        full = int(np.count_nonzero(self.slots < 1))
        with_req = np.where(self.request > 0, self.request, 1.0)
        k = int(np.argmin((short / with_req).sum(axis=1) + (self.slots < 1)))
        node = snap.nodes[int(self.candidates[k])].name
        lacking = snap.resources(short[k])
        worst = max(per_dim, key=lambda name: (per_dim[name], name)) if per_dim else None
        counts = ", ".join(f"{n} short of {name}" for name, n in per_dim.items() if n)
        if full:
            counts += f"{', ' if counts else ''}{full} at max tasks"
        if self.withheld and not lacking:
            return Reason(
                code=ReasonCode.BLOCKED_BY_RESERVATION,
                message=f"room for {what} is held for a starving job's reservation; "
                "fix: set a walltime or runtimeEstimate so it can backfill",
                node=node,
            )
        n_excluded = sum(self.excluded.values())
        tail = f"; {n_excluded} more excluded by predicates" if n_excluded else ""
        closest = (
            f"closest is {node}, which lacks {lacking.describe()}"
            if lacking
            else f"closest is {node}"
        )
        return Reason(
            code=ReasonCode.INSUFFICIENT,
            message=f"0/{total} nodes have room for {what}: {counts}{tail}; {closest}",
            resource=worst,
            node=node,
            shortfall=lacking,
        )


def place_tasks(
    session: Session,
    stmt: Statement,
    tasks: Sequence[TaskInfo],
    *,
    allow_pipeline: bool = True,
    withheld: Vector | None = None,
) -> Outcome:
    """Place ``tasks`` (pending, any roles) in order; stop at the first one that fails.

    Queue limits are checked through the ``allocatable`` point before each task.
    """
    placers: dict[tuple[str, str], ClassPlacer] = {}
    allocated = pipelined = 0
    for task in tasks:
        refusal = session.points.allocatable(task)
        if refusal is not None:
            return Outcome(
                allocated,
                pipelined,
                Reason(code=ReasonCode.QUEUE_LIMIT, message=refusal, queue=task.job.queue.name),
            )
        placer = placers.get(task.role.key)
        if placer is None:
            placer = placers[task.role.key] = ClassPlacer(session, task, withheld)
        result = placer.place(stmt, task, allow_pipeline=allow_pipeline)
        if result is None:
            return Outcome(allocated, pipelined, placer.shortage_reason(task))
        if result == "allocated":
            allocated += 1
        else:
            pipelined += 1
    return Outcome(allocated, pipelined, None)


def describe_vector(session: Session, row: Vector) -> str:
    """``gpu=8, cpu=16`` for the non-zero finite entries of ``row``."""
    dims = session.snapshot.dims
    parts = [
        f"{dims[i]}={format_amount(dims[i], float(v))}"
        for i, v in enumerate(row)
        if v and np.isfinite(v)
    ]
    return ", ".join(parts) or "nothing"


def try_job(
    session: Session,
    job: JobInfo,
    *,
    withheld: Vector | None = None,
    allow_pipeline: bool = True,
) -> bool:
    """Place ``job``'s pending tasks as one gang; True when its placements stand.

    The statement commits when the job is ready (its binds are dispatched), is kept
    when the job is only pipelined, and is discarded otherwise (all-or-nothing), in
    which case the job's reason says what was short.
    """
    tasks = sorted(
        job.pending_tasks(), key=lambda t: (session.points.task_order.key(t), t.role.index, t.index)
    )
    if not tasks:
        return True
    with session.statement() as stmt:
        outcome = place_tasks(
            session, stmt, tasks, allow_pipeline=allow_pipeline, withheld=withheld
        )
        placed = outcome.allocated + outcome.pipelined
        if placed and session.job_ready(job):
            stmt.commit()
            return True
        if placed and session.job_pipelined(job):
            stmt.keep()
            session.record_reason(
                job,
                Reason(
                    code=ReasonCode.WAITING_FOR_RELEASE,
                    message=f"{outcome.pipelined} task(s) wait for resources being released; "
                    "they start when the evicted or finishing tasks are gone",
                ),
            )
            return True
        stmt.discard()
    reason = outcome.reason
    if reason is None:
        reason = Reason(
            code=ReasonCode.GANG,
            message=f"gang needs {job.min_available} tasks; only {placed} exist pending",
        )
    elif placed:
        reason = Reason(
            code=ReasonCode.GANG,
            message=f"gang needs {job.min_available} tasks together but only {job.ready_count + placed} "
            f"fit: {reason.message}",
            resource=reason.resource,
            queue=reason.queue,
            node=reason.node,
            shortfall=reason.shortfall,
        )
    session.record_reason(job, reason)
    return False
