"""Vectorized placement of identical tasks (the reasons when they do not fit: ``shortage``).

Tasks of one role form an equivalence class: predicates are evaluated once over every
node, scores once over the candidates that fit (over all of them unless every scorer is
node-local; kept through the session per class where every scorer promises it, see
``ClassScores``), and after each placement only the chosen node is re-checked (and
re-scored when every scorer is node-local). Where every scorer can look ahead, the
tasks a node keeps winning are placed on it in one run: the same binds, in the same
order, as placing them one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import Statement
from phalanx.engine.placement.gputypes import TypeMask, asks_gpus, spoken
from phalanx.engine.placement.shortage import shortage_reason
from phalanx.engine.snapshot import EPSILON, JobInfo, TaskInfo, Vector

NEG = -np.inf
#: after n lookaheads in a row that found no run, the next 2**n - 1 runs (at most
#: 2**_MOST_SKIPPED - 1) are placed without one: what is placed is the same either way
_MOST_SKIPPED = 5


@dataclass(frozen=True, slots=True)
class Outcome:
    """How many tasks were allocated and pipelined, and why the rest were not."""

    allocated: int
    pipelined: int
    reason: Reason | None


class ClassPlacer:
    """Places tasks of one role on the best nodes, one at a time, updating one node per step."""

    def __init__(
        self,
        session: Session,
        sample: TaskInfo,
        withheld: Vector | None,
        within: NDArray[np.bool_] | None = None,
        typed: TypeMask | None = None,
    ) -> None:
        snap = session.snapshot
        self.session = session
        self.role = sample.role
        self.request = sample.role.request
        self.need = np.flatnonzero(self.request > 0)
        mask, self.excluded = session.static_mask(sample.role)
        if within is not None:  # confined: the nodes outside are excluded too
            outside = int(np.count_nonzero(mask & ~within))
            mask = mask & within
            if outside:
                self.excluded = {**self.excluded, "the job's confinement": outside}
        if typed is not None and asks_gpus(sample.role):  # the job's GPU type: only its nodes
            other = int(np.count_nonzero(mask & ~typed.mask))
            mask = mask & typed.mask
            if other:
                self.excluded = {**self.excluded, f"its GPU type {spoken(typed.name)}": other}
        self.candidates: NDArray[np.intp] = np.flatnonzero(mask)
        cand = self.candidates
        every = cand.size == len(snap.nodes)  # slices copy faster than fancy indexing

        def rows(array: NDArray[Any]) -> NDArray[Any]:
            return array if every else array[cand]

        self.now_free: NDArray[np.float64] = rows(snap.capacity) - rows(snap.used)
        self.withheld = None if withheld is None else rows(withheld)
        if self.withheld is not None:
            self.now_free -= self.withheld
        self.future_free = self.now_free + rows(snap.releasing)
        self.future_free -= rows(snap.pipelined)
        self.slots: NDArray[np.float64] = rows(snap.max_tasks) - rows(snap.task_count)
        self.node_local = session.points.node_score.node_local
        self.fills = session.points.node_score.fills
        self.stale: tuple[TaskInfo, int] | None = None  # a node placed on, not re-scored yet
        #: looking ahead found no run this many times in a row; skip it for ``skips`` runs
        self.misses = self.skips = 0
        #: a node's score after the run placed on it, known from looking ahead
        self.next_score: tuple[int, float] | None = None
        self.demand = sample.role.cards
        #: whether each candidate's cards can serve one more task now (all True without GPUs)
        self.cards_ok = (
            np.ones(cand.size, np.bool_)
            if self.demand is None
            else snap.cards.fits(self.demand, slice(None) if every else cand)
        )
        fits_future = self.fits(self.future_free)
        if self.demand is not None:
            rows_of = slice(None) if every else cand
            fits_future &= (
                snap.cards.fits(self.demand, rows_of, later=True)
                if snap.cards.releasing_tasks
                else self.cards_ok  # nothing is being released: later is now
            )
        if self.node_local:  # placing only takes room: a node that does not fit never will
            self.scores = np.full(cand.size, NEG)
            fitting = np.flatnonzero(fits_future)
            if fitting.size:
                self.scores[fitting] = session.class_scores(sample, cand[fitting])
        else:
            self.scores = self._score(sample, cand)
        self.future_scores = np.where(fits_future, self.scores, NEG)
        self.now_scores = np.where(
            fits_future & self.fits(self.now_free) & self.cards_ok, self.scores, NEG
        )

    def fits(self, free: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Per candidate: room in ``free`` (candidates x resources) and a task slot for one
        more task of the class."""
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

    def place(self, stmt: Statement, tasks: Sequence[TaskInfo], *, allow_pipeline: bool) -> Outcome:
        """Place ``tasks`` (all of this role) in order; stop at the first that cannot go."""
        allocated = pipelined = 0
        position = 0
        while position < len(tasks):
            if self.stale is not None:  # re-scored only when another task will read it
                self._refresh(*self.stale)
                self.stale = None
            task = tasks[position]
            refusal = self.session.points.allocatable(task)
            if refusal is not None:
                return Outcome(allocated, pipelined, _queue_reason(task, refusal))
            if self.candidates.size == 0:
                return Outcome(allocated, pipelined, self.shortage_reason(task))
            k = int(np.argmax(self.now_scores))
            if self.now_scores[k] > NEG:
                count = self._run_length(task, k, len(tasks) - position)
                placed = self._allocate_run(stmt, tasks[position : position + count], k)
                if placed < count:
                    self.next_score = None
                allocated += placed
                position += placed
                self.stale = (task, k)
                if placed < count:  # the queue refused part of the run
                    refusal = self.session.points.allocatable(tasks[position])
                    return Outcome(allocated, pipelined, _queue_reason(task, refusal or ""))
                continue
            k = int(np.argmax(self.future_scores))
            if not allow_pipeline or self.future_scores[k] == NEG:
                return Outcome(allocated, pipelined, self.shortage_reason(task))
            stmt.pipeline(task, int(self.candidates[k]))
            self.next_score = None
            self.future_free[k] -= self.request
            self.slots[k] -= 1
            self.stale = (task, k)
            pipelined += 1
            position += 1
        return Outcome(allocated, pipelined, None)

    def _run_length(self, task: TaskInfo, k: int, remaining: int) -> int:
        """How many tasks go to node ``k`` before it must be compared with others again:
        while it has room and stays the best node (by the ``fills`` promise, or by its
        scores ahead against the best other node, ties to the lower index as ``argmax``)."""
        self.next_score = None
        if remaining == 1 or not (self.fills or self.node_local):
            return 1
        if self.skips and not self.fills:  # where runs are rare (a busy cluster), looking
            self.skips -= 1  # ahead costs in vain
            return 1
        room = self._room(k, remaining)
        if self.fills or room == 1:
            return room
        ahead = self.session.points.node_score.ahead(task, int(self.candidates[k]), room - 1)
        if ahead is None:
            return 1
        scores = self.now_scores
        mine, scores[k] = scores[k], NEG
        other = int(np.argmax(scores))
        best = scores[other]
        scores[k] = mine
        wins = (ahead > best) | ((ahead == best) & (k < other))
        run = int(np.argmin(wins)) if not wins.all() else len(wins)
        if run < len(ahead):  # the node's score once the run is placed: no re-scoring then
            self.next_score = (k, float(ahead[run]))
        self.misses = 0 if run else self.misses + 1
        self.skips = (1 << min(self.misses, _MOST_SKIPPED)) - 1
        return 1 + run

    def _room(self, k: int, remaining: int) -> int:
        """How many of ``remaining`` tasks node ``k`` has room for now (at least 1)."""
        need = self.need
        if need.size == 0:
            room = remaining
        else:
            free = np.minimum(self.now_free[k, need], self.future_free[k, need]) + EPSILON
            room = int(np.floor(free / self.request[need]).min())
        if self.demand is not None:
            node = int(self.candidates[k])
            room = min(room, self.session.snapshot.cards.room(self.demand, node))
        return max(1, min(remaining, room, int(min(self.slots[k], remaining))))

    def _allocate_run(self, stmt: Statement, run: Sequence[TaskInfo], k: int) -> int:
        node = int(self.candidates[k])
        allocatable = self.session.points.allocatable
        placed = len(run)
        for i, task in enumerate(run):
            if i and allocatable(task) is not None:
                placed = i
                break
            stmt.allocate(task, node)
        # engine amounts are whole numbers: taking ``placed`` requests at once is exact
        taken = self.request * placed
        self.now_free[k] -= taken
        self.future_free[k] -= taken
        self.slots[k] -= placed
        return placed

    def _refresh(self, task: TaskInfo, k: int) -> None:
        fits_future = self._fits_row(self.future_free[k], k)
        if self.demand is not None:
            node = np.array([self.candidates[k]], dtype=np.intp)
            cards = self.session.snapshot.cards
            self.cards_ok[k] = cards.fits(self.demand, node)[0]
            fits_future = fits_future and bool(cards.fits(self.demand, node, later=True)[0])
        known, self.next_score = self.next_score, None
        if self.node_local:  # a node that no longer fits is never read again: not re-scored
            if fits_future and known is not None and known[0] == k:
                self.scores[k] = known[1]
            elif fits_future:
                self.scores[k] = self._score(task, self.candidates[k : k + 1])[0]
        else:
            self.scores = self._score(task, self.candidates)
        fits_now = fits_future and self._fits_row(self.now_free[k], k) and bool(self.cards_ok[k])
        self.now_scores[k] = self.scores[k] if fits_now else NEG
        self.future_scores[k] = self.scores[k] if fits_future else NEG
        if not self.node_local:
            self.now_scores = np.where(np.isfinite(self.now_scores), self.scores, NEG)
            self.future_scores = np.where(np.isfinite(self.future_scores), self.scores, NEG)

    def _fits_row(self, row: NDArray[np.float64], k: int) -> bool:
        need = self.need
        return self.slots[k] >= 1 and bool((row[need] + EPSILON >= self.request[need]).all())

    def shortage_reason(self, task: TaskInfo) -> Reason:
        """Why no candidate node can take ``task``: counts per short resource, the closest node."""
        return shortage_reason(self, task)


def place_tasks(
    session: Session,
    stmt: Statement,
    tasks: Sequence[TaskInfo],
    *,
    allow_pipeline: bool = True,
    withheld: Vector | None = None,
    within: NDArray[np.bool_] | None = None,
    typed: TypeMask | None = None,
) -> Outcome:
    """Place ``tasks`` (pending, any roles) in order; stop at the first one that fails.

    Queue limits are checked through the ``allocatable`` point before each task. With
    ``within`` (a mask over every node), only those nodes are used; with ``typed``, the
    tasks that ask for GPUs use only the nodes of that GPU type.
    """
    placers: dict[tuple[str, str], ClassPlacer] = {}
    allocated = pipelined = 0
    start = 0
    while start < len(tasks):
        role = tasks[start].role
        end = start
        while end < len(tasks) and tasks[end].role is role:
            end += 1
        placer = placers.get(role.key)
        if placer is None:
            placer = placers[role.key] = ClassPlacer(session, tasks[start], withheld, within, typed)
        outcome = placer.place(stmt, tasks[start:end], allow_pipeline=allow_pipeline)
        allocated += outcome.allocated
        pipelined += outcome.pipelined
        if outcome.reason is not None:
            return Outcome(allocated, pipelined, outcome.reason)
        start = end
    return Outcome(allocated, pipelined, None)


def _queue_reason(task: TaskInfo, refusal: str) -> Reason:
    return Reason(code=ReasonCode.QUEUE_LIMIT, message=refusal, queue=task.job.queue.name)


def settle(session: Session, job: JobInfo, stmt: Statement, outcome: Outcome) -> bool:
    """Commit ``stmt`` when ``job`` is ready, keep it when the job is pipelined (True for
    both, with the reason the rest wait), else discard it (False)."""
    placed = outcome.allocated + outcome.pipelined
    if placed and session.job_ready(job):
        stmt.commit()
        if outcome.reason is not None:  # placed in part (no gang): say what the rest lack
            session.record_reason(job, outcome.reason)
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
    return False
