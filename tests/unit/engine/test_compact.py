"""compact's choice of nodes: the job's own first, then the fewest that hold the rest."""

from __future__ import annotations

import numpy as np

from phalanx.engine.plugins.compact import _fewest


def _chosen(fits: list[int], held: list[int], wanted: int, scores: list[float] | None = None):
    found = _fewest(
        np.array(fits, dtype=np.int64),
        np.array(scores or [0.0] * len(fits)),
        np.isin(np.arange(len(fits)), held),
        wanted,
    )
    return None if found is None else np.flatnonzero(found).tolist()


def test_the_rest_goes_to_the_node_with_least_room_that_holds_it_all() -> None:
    # holes of 1 and 1, a node with 4 free and one with 8: three replicas fill the 4
    assert _chosen([1, 1, 4, 8], held=[], wanted=3) == [2]
    assert _chosen([1, 1, 4, 8], held=[], wanted=6) == [3]


def test_more_than_a_node_holds_takes_the_roomiest_nodes_first() -> None:
    assert _chosen([1, 4, 8, 2], held=[], wanted=11) == [1, 2]  # 8, then 3 of the 4
    assert _chosen([1, 4, 8, 2], held=[], wanted=10) == [2, 3]  # 8, then best fit: 2


def test_the_jobs_own_nodes_come_first() -> None:
    assert _chosen([1, 4, 8], held=[1], wanted=2) == [1]
    assert _chosen([1, 2, 8], held=[0], wanted=3) == [0, 1]  # its 1, then best fit for 2


def test_the_scores_choose_among_nodes_that_hold_the_rest() -> None:
    # spot-like capacity scored higher holds all three: it wins over the best fit
    assert _chosen([4, 8], held=[], wanted=3, scores=[0.0, 100.0]) == [1]


def test_nothing_is_chosen_when_the_replicas_cannot_all_fit() -> None:
    assert _chosen([1, 2], held=[], wanted=4) is None
