"""Each extension point combines its plugins' answers by the rule its type names."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.extension import (
    EXTENSION_POINTS,
    AllPoint,
    AnyPoint,
    CheckPoint,
    MaskPoint,
    OrderPoint,
    Points,
    ScorePoint,
    VictimPoint,
    Vote,
    VotePoint,
)
from phalanx.engine.framework.plugin import Plugin


def test_order_is_first_non_zero_in_tier_order() -> None:
    point: OrderPoint[tuple[int, int]] = OrderPoint("job_order")
    point.register("priority", 0, lambda item: -item[0])
    point.register("drf", 1, lambda item: item[1])
    items = [(0, 1), (5, 9), (5, 2)]
    assert sorted(items, key=point.key) == [(5, 2), (5, 9), (0, 1)]


def test_second_registration_is_refused() -> None:
    point: AllPoint[int] = AllPoint("job_ready")
    point.register("gang", 0, lambda _: True)
    with pytest.raises(PluginError, match="twice"):
        point.register("gang", 0, lambda _: True)


def test_all_and_any_defaults() -> None:
    assert AllPoint[int]("job_ready")(1) is True
    assert AnyPoint[int]("overused")(1) is False
    point: AllPoint[int] = AllPoint("job_ready")
    point.register("a", 0, lambda x: x > 0)
    point.register("b", 0, lambda x: x > 5)
    assert point(9) and not point(3)
    assert point.first_refusal(3) == "b"


def test_check_returns_the_first_refusal() -> None:
    point: CheckPoint[int] = CheckPoint("allocatable")
    point.register("a", 0, lambda x: None)
    point.register("b", 0, lambda x: "queue full" if x > 1 else None)
    assert point(1) is None
    assert point(2) == "queue full"


def test_vote_reject_wins_and_permit_ends_the_walk_after_its_tier() -> None:
    calls: list[str] = []

    def voter(name: str, vote: Vote) -> object:
        def fn(_: int) -> Vote:
            calls.append(name)
            return vote

        return fn

    point: VotePoint[int] = VotePoint("job_enqueueable")
    point.register("permit", 0, voter("permit", Vote.PERMIT))  # type: ignore[arg-type]
    point.register("reject-same-tier", 0, voter("reject-same-tier", Vote.REJECT))  # type: ignore[arg-type]
    assert point.first_rejection(0) == "reject-same-tier"

    later: VotePoint[int] = VotePoint("job_enqueueable")
    later.register("permit", 0, voter("p", Vote.PERMIT))  # type: ignore[arg-type]
    later.register("reject-next-tier", 1, voter("r", Vote.REJECT))  # type: ignore[arg-type]
    calls.clear()
    assert later(0) is True
    assert calls == ["p"]


def test_victims_must_pass_every_plugin_and_none_means_none() -> None:
    assert VictimPoint[int, int]("preemptable")(0, [1, 2, 3]) == []
    point: VictimPoint[int, int] = VictimPoint("preemptable")
    judged: list[list[int]] = []
    point.register("a", 0, lambda _, c: [x for x in c if x > 1])
    point.register("b", 1, lambda _, c: judged.append(list(c)) or [x for x in c if x < 4])
    assert point(0, [1, 2, 3, 4]) == [2, 3]
    assert judged == [[2, 3, 4]]  # a later plugin judges only what the earlier ones accepted
    assert not point.in_any_order  # registered without ``each``: order may matter


def test_victims_may_come_in_any_order_only_when_every_plugin_judges_each() -> None:
    point: VictimPoint[int, int] = VictimPoint("preemptable")
    point.add("priority", 0, lambda _, c: [x for x in c if x > 1], each=True)
    assert point.in_any_order
    point.add("quota", 1, lambda _, c: list(c)[:2])  # keeps the first ones: order matters
    assert not point.in_any_order


def test_masks_and_and_count_exclusions_by_first_plugin() -> None:
    point: MaskPoint[int] = MaskPoint("predicate")
    point.register("labels", 0, lambda _: np.array([True, False, True, False]))
    point.register("taints", 0, lambda _: np.array([True, False, False, True]))
    mask, excluded = point(0, 4)
    assert mask.tolist() == [True, False, False, False]
    assert excluded == {"labels": 2, "taints": 1}


def test_scores_are_weighted_sums_and_promises_combine() -> None:
    point = ScorePoint("node_score")
    point.add("binpack", 0, lambda _, nodes: np.full(len(nodes), 10.0), weight=2, fills=True)
    point.add("spread", 0, lambda _, nodes: np.arange(len(nodes), dtype=float), node_local=True)
    assert point(None, np.arange(3)).tolist() == [20.0, 21.0, 22.0]
    assert point.node_local
    assert not point.fills


def test_scores_ahead_are_weighted_sums_when_every_scorer_can_tell() -> None:
    point = ScorePoint("node_score")
    point.add(
        "balanced",
        0,
        lambda _, nodes: np.full(len(nodes), 50.0),
        weight=0.5,
        ahead=lambda _, node, count: np.arange(count, dtype=float),
    )
    point.add(
        "fgd",
        0,
        lambda _, nodes: np.full(len(nodes), 50.0),
        ahead=lambda _, node, count: np.full(count, float(node)),
    )
    ahead = point.ahead(None, 7, 3)
    assert ahead is not None and ahead.tolist() == [7.0, 7.5, 8.0]

    point.add("spread", 0, lambda _, nodes: np.zeros(len(nodes)))  # cannot tell
    assert point.ahead(None, 7, 3) is None
    cautious = ScorePoint("node_score")
    cautious.add("fgd", 0, lambda _, nodes: np.zeros(len(nodes)), ahead=lambda *_: None)
    assert cautious.ahead(None, 0, 2) is None
    remote = ScorePoint("node_score")  # a scorer that is not node-local cannot look ahead
    remote.add(
        "x", 0, lambda _, n: np.zeros(len(n)), node_local=False, ahead=lambda *_: np.zeros(2)
    )
    assert remote.ahead(None, 0, 2) is None


def test_every_extension_point_is_named_once_and_is_a_plugin_method() -> None:
    points = Points()
    assert {point.name for point in fields(Points)} == EXTENSION_POINTS
    assert all(getattr(points, name).name == name for name in EXTENSION_POINTS)
    assert all(callable(vars(Plugin).get(name)) for name in EXTENSION_POINTS)


def test_an_in_line_only_order_is_left_out_of_the_judged_key() -> None:
    from phalanx.engine.framework.extension import OrderPoint

    point: OrderPoint[int] = OrderPoint("job_order")
    point.register("priority", 0, lambda n: -n)
    point.register_in_line_only("fairshare", 0, lambda n: n * 0.5)
    assert point.key(4) == (-4, 2.0)
    assert point.judged_key(4) == (-4,)
    assert point.plugins == ("priority", "fairshare")
