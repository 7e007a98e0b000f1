"""The backlog bound (issue 43): a session's work grows linearly with the jobs waiting,
for every shipped policy, and each waiting job costs a bounded multiple of what it costs
``fifo``. Work is counted in Python function calls (``backlog.session_calls``), not
timed: the same code on the same state makes the same calls on any machine."""

from __future__ import annotations

import pytest

from phalanx.policies import load_policy, policy_names
from tests.scenarios.backlog import NOW, session_calls

#: the backlogs compared: N, 2N and 4N waiting jobs
N = 100
#: the most the work added by 2N more jobs may exceed twice that added by N more
#: (work per job that grew with the backlog, say W log W calls, would exceed it at these sizes)
LINEAR_SLACK = 1.1
#: what a waiting job may cost any shipped policy, in fifo's cost per waiting job
#: (tiresias-pollux searched for victims for each waiting job, every session: 14x fifo;
#: 6.7x since eviction's memo and the kept job-order keys)
PER_JOB_BUDGET = 8.0
#: the same two hours on, when every waiting job passes enqueue under sla (phalanx-default
#: put them in line once per action: 24x fifo; 14x since the kept job-order keys)
LATE_PER_JOB_BUDGET = 16.0
#: a session two hours later, when every waiting job has waited past an hour
LATE = NOW + 7200.0


def _added(policy: str, now: float = NOW) -> tuple[int, int]:
    """The calls added by going from N to 2N and from 2N to 4N waiting jobs."""
    config = load_policy(policy).config
    base, double, quadruple = (session_calls(config, n, now=now) for n in (N, 2 * N, 4 * N))
    return double - base, quadruple - double


@pytest.fixture(scope="module")
def fifo_per_job() -> float:
    _, later = _added("fifo")
    return later / (2 * N)


@pytest.fixture(scope="module")
def fifo_late_per_job() -> float:
    _, later = _added("fifo", LATE)
    return later / (2 * N)


@pytest.mark.parametrize("policy", policy_names())
def test_a_session_costs_linear_when_every_waiting_job_starves(
    policy: str, fifo_late_per_job: float
) -> None:
    # two hours on, every waiting job has waited past sla's hour (phalanx-default): it
    # passes enqueue and allocate, reclaim and preempt each look at it; the running jobs
    # have passed las' thresholds, so Tiresias' waiting jobs may preempt them
    first, later = _added(policy, LATE)

    assert first > 0
    assert later <= 2 * first * LINEAR_SLACK, f"{policy}: {first} calls for N more, {later} for 2N"
    per_job = later / (2 * N)
    assert per_job <= LATE_PER_JOB_BUDGET * fifo_late_per_job, (
        f"{policy}: {per_job:.0f} calls per waiting job, fifo {fifo_late_per_job:.0f}"
    )


@pytest.mark.parametrize("policy", policy_names())
def test_a_session_costs_linear_in_the_waiting_jobs(policy: str, fifo_per_job: float) -> None:
    first, later = _added(policy)

    assert first > 0  # waiting jobs are looked at: the count measures the session's work
    assert later <= 2 * first * LINEAR_SLACK, f"{policy}: {first} calls for N more, {later} for 2N"
    per_job = later / (2 * N)
    assert per_job <= PER_JOB_BUDGET * fifo_per_job, (
        f"{policy}: {per_job:.0f} calls per waiting job, fifo {fifo_per_job:.0f}"
    )
