"""``Node.cordoned_gpus``: cards out of scheduling, each one of the node's own."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources


def _listed(*cordoned: int) -> Node:
    gpus = tuple(Gpu(index=i) for i in range(4))
    return Node(
        name="g0",
        capacity=Resources.of({"gpu": 4}),
        gpus=gpus,
        cordoned_gpus=frozenset(cordoned),
    )


def test_no_card_is_cordoned_by_default() -> None:
    assert Node(name="n", capacity=Resources.of({"gpu": 8})).cordoned_gpus == frozenset()


def test_cordoned_cards_name_listed_gpus_or_the_gpu_capacity_by_index() -> None:
    assert _listed(0, 3).cordoned_gpus == {0, 3}
    bare = Node(name="n", capacity=Resources.of({"gpu": 8}), cordoned_gpus=frozenset({7}))
    assert bare.cordoned_gpus == {7}


@pytest.mark.parametrize("cordoned", [{4}, {-1}, {0, 9}])
def test_a_card_the_node_lacks_is_refused_naming_the_field_and_the_fix(
    cordoned: set[int],
) -> None:
    with pytest.raises(InvalidInput) as raised:
        _listed(*cordoned)
    assert raised.value.field == "cordoned_gpus"
    assert "node g0" in str(raised.value)
    assert "its cards: 0, 1, 2, 3" in str(raised.value)
    assert raised.value.fix


def test_a_node_without_gpus_has_no_card_to_cordon() -> None:
    with pytest.raises(InvalidInput, match="not cards of the node"):
        Node(name="cpu", capacity=Resources.of({"cpu": 8000}), cordoned_gpus=frozenset({0}))


def test_a_bool_is_not_a_card_index() -> None:
    with pytest.raises(InvalidInput, match="True"):
        _listed(True)
