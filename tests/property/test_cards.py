"""Card state under any sequence of takes and gives: capacity never exceeded, counts exact,
no cordoned card given out, and giving everything back restores the state bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import preset
from phalanx.engine.cards import WHOLE, CardDemand, Cards

GiB = 2**30
DEMANDS = st.one_of(
    st.builds(
        CardDemand,
        whole=st.just(0),
        milli=st.sampled_from([0.0, 100.0, 250.0, 500.0, 700.0]),
        memory=st.sampled_from([0.0, 4.0 * GiB, 10.0 * GiB]),
    ).filter(lambda d: d.milli or d.memory),
    st.builds(
        CardDemand,
        whole=st.integers(1, 4),
        milli=st.just(0.0),
        memory=st.just(0.0),
        exclusive_nic=st.booleans(),
    ),
)


def _cards(*, cordoned: bool = False) -> Cards:
    """A DGX-1 and a 2-card box; with ``cordoned``, cards 2 and 5 of the DGX and 1 of the
    box are out of scheduling."""
    topology = preset("dgx1-v100")
    gpus = tuple(Gpu(index=i, memory=16 * GiB) for i in range(8))
    capacity = Resources.of({"gpu": 8, "gpu-memory": 8 * 16 * GiB})
    nodes = [
        Node(
            name="dgx",
            capacity=capacity,
            gpus=gpus,
            gpu_topology=topology,
            cordoned_gpus=frozenset({2, 5} if cordoned else ()),
        ),
        Node(
            name="box",
            capacity=Resources.of({"gpu": 2}),
            cordoned_gpus=frozenset({1} if cordoned else ()),
        ),
    ]
    return Cards(nodes)


def _state(cards: Cards) -> list[np.ndarray]:
    return [
        a.copy() for a in (cards.milli_free, cards.memory_free, cards.whole_free, cards.nic_users)
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(DEMANDS, st.integers(0, 1)), max_size=30), st.booleans())
def test_takes_never_overcommit_and_gives_restore_exactly(
    steps: list[tuple[CardDemand, int]], cordoned: bool
) -> None:
    cards = _cards(cordoned=cordoned)
    before = _state(cards)
    held = []
    for demand, node in steps:
        chosen = cards.first_fit(demand, node)
        if chosen is None:
            assert not cards.fits(demand, np.array([node]))[0]
            continue
        assert cards.serves(demand, node, chosen)
        assert not cards.cordoned[node, list(chosen)].any()  # never a cordoned card
        cards.take(demand, node, chosen)
        held.append((demand, node, chosen))
        present = cards.milli_free >= 0
        assert (cards.milli_free[present] <= WHOLE).all()
        assert (cards.memory_free[present] >= 0).all()
        whole = (cards.milli_free == WHOLE) & (cards.memory_free == cards.memory_capacity)
        assert (cards.whole_free == (whole & cards.offered).sum(axis=1)).all()
        assert (cards.nic_users[:, :-1] <= 1).all()  # a NIC is held by one task at most
    for demand, node, chosen in reversed(held):
        cards.give(demand, node, chosen)
    for a, b in zip(before, _state(cards), strict=True):
        assert np.array_equal(a, b)
