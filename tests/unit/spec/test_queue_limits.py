"""A Queue's per-user limits and budget: parsed into the domain, and refused when bad
with the field and the fix."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.queue import Budget, UserLimits, WhenSpent
from phalanx.domain.resources import Resources
from phalanx.engine.snapshot.usage import KEEP_HOURS
from phalanx.spec import QueueDocument, load_documents
from phalanx.spec.queue import MAX_BUDGET_PERIOD

QUEUE = textwrap.dedent(
    """\
    apiVersion: phalanx/v1
    kind: Queue
    metadata: {name: nlp}
    spec:
      limits:
        runningJobs: 4
        waitingJobs: 20
        resources: {gpu: 8}
      userLimits:
        alice: {runningJobs: 8, resources: {gpu: 16}}
      budget:
        period: 7d
        perUser: {gpu: 100, memory: 512Gi}
        queue: {gpu: 1000}
        whenSpent: lowerPriority
    """
)


def _queue(text: str) -> QueueDocument:
    (document,) = load_documents(text)
    assert isinstance(document, QueueDocument)
    return document


def _refused(spec: str) -> str:
    text = f"apiVersion: phalanx/v1\nkind: Queue\nmetadata: {{name: nlp}}\nspec:\n{spec}"
    with pytest.raises(DocumentError) as caught:
        load_documents(text)
    return str(caught.value)


def test_limits_and_budget_reach_the_domain_in_canonical_units() -> None:
    queue = _queue(QUEUE).to_domain()

    assert queue.limits == UserLimits(
        running_jobs=4, waiting_jobs=20, resources=Resources.of({"gpu": 8})
    )
    assert queue.budget == Budget(
        period=7 * 86400.0,
        per_user=Resources.of({"gpu": 100, "memory": 512 * 2**30}),
        queue=Resources.of({"gpu": 1000}),
        when_spent=WhenSpent.LOWER_PRIORITY,
    )


def test_a_users_own_limits_replace_the_fields_they_set() -> None:
    queue = _queue(QUEUE).to_domain()

    assert queue.limits_of("alice") == UserLimits(
        running_jobs=8, waiting_jobs=20, resources=Resources.of({"gpu": 16})
    )
    assert queue.limits_of("bob") == queue.limits  # a user not named: the queue's limits


def test_a_queue_without_limits_limits_nothing() -> None:
    queue = _queue("apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: nlp}\n").to_domain()

    assert queue.limits.empty and queue.user_limits == () and queue.budget is None
    assert queue.limits_of("anyone").empty


def test_a_budget_holds_by_default() -> None:
    queue = _queue(
        "apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: nlp}\n"
        "spec:\n  budget: {period: 1d, perUser: {gpu: 10}}\n"
    ).to_domain()

    assert queue.budget is not None and queue.budget.when_spent is WhenSpent.HOLD


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("  limits: {runningJobs: -1}\n", "spec.limits.runningJobs: must be >= 0"),
        ("  limits: {waitingJobs: 2.5}\n", "spec.limits.waitingJobs: expected an integer"),
        ("  limits: {resources: {gpu: -8}}\n", "spec.limits.resources.gpu"),
        ("  limits: {maxJobs: 3}\n", "spec.limits.maxJobs: unknown field"),
        ("  userLimits: {alice: {runningJobs: -2}}\n", "spec.userLimits.alice.runningJobs"),
        ("  userLimits: {'al ice': {runningJobs: 2}}\n", "not a valid user name"),
        ("  budget: {perUser: {gpu: 1}}\n", "spec.budget.period"),
        ("  budget: {period: 0, perUser: {gpu: 1}}\n", "spec.budget.period"),
        ("  budget: {period: 90m, perUser: {gpu: 1}}\n", "whole number of hours"),
        ("  budget: {period: 60d, perUser: {gpu: 1}}\n", "spec.budget.period"),
        ("  budget: {period: 7d}\n", "spec.budget.perUser: a budget without amounts"),
        (
            "  budget: {period: 7d, perUser: {gpu: 1}, whenSpent: drop}\n",
            "spec.budget.whenSpent",
        ),
    ],
)
def test_bad_limits_and_budgets_are_refused_naming_the_field(spec: str, said: str) -> None:
    message = _refused(spec)

    assert said in message
    assert "fix:" in message


def test_the_longest_budget_period_is_what_the_usage_book_keeps() -> None:
    assert MAX_BUDGET_PERIOD == KEEP_HOURS * 3600
