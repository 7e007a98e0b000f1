"""A Queue's ``idleGpus``: parsed into the domain (percent and seconds), refused when bad
with the field and the fix, and said for people."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.queue import IdleAction, IdlePolicy
from phalanx.spec import QueueDocument, load_documents
from phalanx.spec.queue import limits_summary


def _queue(spec: str) -> QueueDocument:
    text = f"apiVersion: phalanx/v1\nkind: Queue\nmetadata: {{name: nlp}}\nspec:\n{spec}"
    (document,) = load_documents(text)
    assert isinstance(document, QueueDocument)
    return document


def test_idle_gpus_reach_the_domain_in_percent_and_seconds() -> None:
    queue = _queue("  idleGpus: {threshold: 5%, window: 30m, action: stop}\n").to_domain()

    assert queue.idle_gpus == IdlePolicy(
        threshold=5.0, window=1800.0, action=IdleAction.STOP, queue="nlp"
    )


@pytest.mark.parametrize(("given", "percent"), [("0.05", 5.0), ("'12.5%'", 12.5), ("0", 0.0)])
def test_a_threshold_is_a_percent_or_a_fraction_of_one(given: str, percent: float) -> None:
    idle = _queue(f"  idleGpus: {{threshold: {given}}}\n").to_domain().idle_gpus

    assert idle is not None and idle.threshold == percent


def test_idle_gpus_default_to_marking_below_5_percent_for_30_minutes() -> None:
    idle = _queue("  idleGpus: {}\n").to_domain().idle_gpus

    assert idle == IdlePolicy(threshold=5.0, window=1800.0, action=IdleAction.MARK, queue="nlp")
    assert _queue("  weight: 1\n").to_domain().idle_gpus is None


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("{threshold: 5}", "spec.idleGpus.threshold: 5 is a fraction of 1 above 1"),
        ("{threshold: 150%}", "spec.idleGpus.threshold: '150%' is not within 0..100%"),
        ("{threshold: -0.1}", "spec.idleGpus.threshold"),
        ("{threshold: lots%}", "spec.idleGpus.threshold: 'lots%' is not a percent"),
        ("{threshold: true}", "spec.idleGpus.threshold"),
        ("{window: 10s}", "spec.idleGpus.window: a window of 10 s"),
        ("{window: soon}", "spec.idleGpus.window"),
        ("{action: kill}", "spec.idleGpus.action"),
        ("{actions: stop}", "spec.idleGpus.actions: unknown field"),
    ],
)
def test_bad_idle_gpus_are_refused_naming_the_field_and_the_fix(spec: str, said: str) -> None:
    with pytest.raises(DocumentError) as caught:
        _queue(f"  idleGpus: {spec}\n")

    assert said in str(caught.value)
    assert "fix:" in str(caught.value)


def test_describe_says_the_queues_own_idle_policy() -> None:
    spec = _queue("  idleGpus: {threshold: 0.1, window: 1h30m, action: stop}\n").spec

    assert limits_summary(spec) == [("Idle GPUs", "below 10% utilisation for 1h30m: stop")]
