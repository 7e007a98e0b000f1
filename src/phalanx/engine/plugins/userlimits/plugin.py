"""userlimits: per-user limits inside a queue (Slurm's MaxJobsPerUser, MaxTRESPerUser)
and budgets of resource-hours per period (GrpTRESMins), from the Queue's ``limits``,
``userLimits`` and ``budget``.

Guarantees, for a job of a queue with limits or a budget:

- Running jobs (``runningJobs``): a job that runs nothing yet gets no task while its
  user runs that many jobs in the queue (a job runs while a task of it is allocated,
  pipelined, bound or running). Tasks placed earlier in the same session count.
- Resources (``resources``): no task is placed that would take what its user holds in
  the queue past the limit of any resource named; a gang is placed whole or not at all,
  so a job whose minimum would pass the limit is held whole, never half-placed.
- Both hold the job pending with a reason that names the user, the queue, the limit and
  its field (``limits.resources.gpu`` or ``userLimits.alice.resources.gpu``). Enqueue
  does not admit a job they would hold (jobs admitted and not started count as about to
  run), so held jobs neither take their queue's capability nor the cluster's admission
  budget from others.
- Budgets: a job is over budget when it asks for a resource whose per-user budget (its
  user's use in the queue this period) or queue budget (all the queue's users
  together) is spent (``budgets``). With ``whenSpent: hold`` its tasks are not placed;
  it waits, with the reason, until the period restarts (it may be admitted meanwhile:
  a period's end is no change that the enqueue action's standing refusals follow, so
  budgets hold at placement only). With ``lowerPriority`` it is ordered after every job
  within budget (job order: put this plugin first in its tier to outrank priority);
  its tasks are the first victims (victim order); and a within-budget job of the queue
  may evict it whatever the priorities (``preemptable``), while an over-budget job may
  evict only over-budget work. ``preemptable`` otherwise keeps the priority plugin's rule
  (strictly lower priority), so with ``priority`` in the config its own filter still
  applies on top (victims pass every plugin): configure ``{name: priority, disable:
  [preemptable]}`` to let within-budget jobs evict over-budget ones of equal or higher
  priority. (The enqueue action admits a job on a full cluster when lower-priority work
  could be preempted for it; it does not count over-budget work as such, so there a
  within-budget job evicts over-budget work once admitted by other means.)

The waiting-jobs limit (``waitingJobs``) is the control plane's: it refuses the submit.
Queues without limits and budgets cost nothing: the plugin then skips every point.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from phalanx.domain.queue import Queue, WhenSpent
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.extension import Vote
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.userlimits.budgets import Budgets
from phalanx.engine.plugins.userlimits.holdings import Holdings, limited
from phalanx.engine.snapshot import JobInfo, TaskInfo


class _Open:
    """One session's holdings, budget verdicts, and which queues are limited."""

    def __init__(self, session: Session) -> None:
        self.session = session
        specs = [q.spec for q in session.snapshot.leaf_queues()]
        self.limited = {q.name for q in specs if limited(q)}
        self.budgeted = {q.name for q in specs if q.budget is not None}
        self.holdings = Holdings(session) if self.limited else None
        self.budgets = Budgets(session.snapshot, session.now)
        self._lower: dict[str, bool] = {}  # job name -> over budget, lowerPriority

    def lowered(self, job: JobInfo) -> bool:
        """Whether ``job`` is over a ``lowerPriority`` budget (known once per session)."""
        found = self._lower.get(job.name)
        if found is None:
            budget = job.queue.spec.budget
            over = (
                self.budgets.over(job)
                if budget is not None and budget.when_spent is WhenSpent.LOWER_PRIORITY
                else None
            )
            found = self._lower[job.name] = over is not None
            if over is not None:  # said with whatever else keeps it waiting
                self.session.note(job, f"{over.split('; fix:')[0]}: after jobs within budget")
        return found


class UserLimitsPlugin(Plugin[_Open]):
    """Per-user running-job and resource limits, and budgets per period."""

    name = "userlimits"
    judges_each = True

    def open(self, session: Session) -> _Open:
        return _Open(session)

    def skipped(self, state: _Open) -> Collection[str]:
        """Points no queue of the session needs: none at all without limits and budgets."""
        skipped: set[str] = set()
        specs = [state.session.snapshot.queues[name].spec for name in state.budgeted]
        if not state.limited:
            skipped.update(("job_enqueueable", "on_allocate", "on_deallocate"))
            if not any(_holds(spec) for spec in specs):
                skipped.add("allocatable")
        if all(_holds(spec) for spec in specs):  # no lowerPriority budget
            skipped.update(("job_order", "victim_order", "preemptable"))
        return skipped

    def job_enqueueable(self, state: _Open, job: JobInfo) -> Vote:
        """Reject a job its running-job or resource limit would hold now."""
        holdings = state.holdings
        if holdings is None or job.queue.name not in state.limited:
            return Vote.ABSTAIN
        limits = holdings.limits(job)
        if limits is None:
            return Vote.ABSTAIN
        holdings.catch_up()
        count, need = holdings.admitted.get(
            (job.queue.name, job.user), (0, np.zeros(len(state.session.snapshot.dims)))
        )
        refusal = holdings.refuse_start(job, limits, extra=count) or holdings.refuse_resources(
            job, limits, np.maximum(job.min_request() - job.allocated, 0), holdings.held(job) + need
        )
        if refusal is None:
            return Vote.ABSTAIN
        reason = Reason(code=ReasonCode.QUEUE_LIMIT, message=refusal, queue=job.queue.name)
        state.session.record_reason(job, reason)
        return Vote.REJECT

    def allocatable(self, state: _Open, task: TaskInfo) -> str | None:
        job = task.job
        queue = job.queue.name
        if queue in state.budgeted and _holds(job.queue.spec):
            over = state.budgets.over(job)
            if over is not None:
                return over
        holdings = state.holdings
        if holdings is None or queue not in state.limited:
            return None
        limits = holdings.limits(job)
        if limits is None:
            return None
        return holdings.refuse_start(job, limits) or holdings.refuse_resources(
            job, limits, task.request, holdings.held(job)
        )

    def job_order(self, state: _Open, job: JobInfo) -> int:
        """Jobs over a ``lowerPriority`` budget after every other."""
        return 1 if job.queue.name in state.budgeted and state.lowered(job) else 0

    def victim_order(self, state: _Open, task: TaskInfo) -> int:
        """Tasks of jobs over a ``lowerPriority`` budget first."""
        job = task.job
        return 0 if job.queue.name in state.budgeted and state.lowered(job) else 1

    def preemptable(
        self, state: _Open, preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        """Strictly lower priority, or over a ``lowerPriority`` budget while the preemptor
        is within it; never within-budget work for an over-budget preemptor."""
        lowered = state.lowered
        mine = preemptor.job
        low = mine.queue.name in state.budgeted and lowered(mine)
        accepted = []
        for task in candidates:
            victim = task.job
            theirs = victim.queue.name in state.budgeted and lowered(victim)
            if low and not theirs:
                continue
            if victim.priority < mine.priority or (theirs and not low):
                accepted.append(task)
        return accepted

    def on_allocate(self, state: _Open, task: TaskInfo) -> None:
        if state.holdings is not None and task.job.queue.name in state.limited:
            state.holdings.follow(task.job)

    def on_deallocate(self, state: _Open, task: TaskInfo) -> None:
        if state.holdings is not None and task.job.queue.name in state.limited:
            state.holdings.follow(task.job)


def _holds(queue: Queue) -> bool:
    return queue.budget is not None and queue.budget.when_spent is WhenSpent.HOLD
