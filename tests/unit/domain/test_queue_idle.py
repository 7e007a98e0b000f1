"""Idle policies of queues: which one applies to a queue's jobs (its own, else its
nearest ancestor's), how it is said, and what is refused."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.queue import IdleAction, IdlePolicy, Queue, idle_policy_of, said_duration

STOP = IdlePolicy(threshold=5.0, window=1800.0, action=IdleAction.STOP)


def _tree(*queues: Queue) -> dict[str, Queue]:
    return {queue.name: queue for queue in queues}


def test_a_leaf_without_its_own_takes_its_nearest_ancestors_policy() -> None:
    queues = _tree(
        Queue(name="team-a", idle_gpus=STOP),
        Queue(name="nlp", parent="team-a"),
        Queue(name="nlp-eval", parent="nlp"),
    )

    assert idle_policy_of("nlp-eval", queues) == IdlePolicy(
        threshold=5.0, window=1800.0, action=IdleAction.STOP, queue="team-a"
    )


def test_a_leafs_own_policy_wins_and_a_zero_threshold_exempts_it() -> None:
    exempt = IdlePolicy(threshold=0.0, window=60.0)
    queues = _tree(
        Queue(name="team-a", idle_gpus=STOP), Queue(name="nlp", parent="team-a", idle_gpus=exempt)
    )

    found = idle_policy_of("nlp", queues)

    assert found is not None and found.threshold == 0.0 and found.queue == "nlp"


def test_no_policy_on_the_way_to_the_root_or_an_unknown_queue_is_none() -> None:
    queues = _tree(Queue(name="a", parent="b"), Queue(name="b", parent="a"))  # a cycle ends too

    assert idle_policy_of("a", queues) is None
    assert idle_policy_of("missing", queues) is None


def test_a_policy_is_said_as_documents_write_it() -> None:
    assert STOP.said() == "below 5% utilisation for 30m"
    assert [said_duration(s) for s in (45, 90, 5400, 86400, 0.2)] == [
        "45s",
        "1m30s",
        "1h30m",
        "1d",
        "1s",
    ]


@pytest.mark.parametrize(("threshold", "window"), [(-1.0, 60.0), (101.0, 60.0), (5.0, 0.0)])
def test_a_threshold_outside_0_to_100_or_an_empty_window_is_refused(
    threshold: float, window: float
) -> None:
    with pytest.raises(InvalidInput, match="fix"):
        IdlePolicy(threshold=threshold, window=window)
