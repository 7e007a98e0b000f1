"""Re-placing an elastic job as it is resized: the fewest nodes, its own replicas kept
where that costs no extra node, new replicas only where room is idle now."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.engine.placement.replan import fewest_nodes, replan
from phalanx.engine.snapshot import TaskStatus


def _plan(room: list[int], own: list[int], wanted: int, scores: list[float] | None = None):
    return fewest_nodes(
        np.array(room),
        np.array(own),
        np.zeros(len(room)) if scores is None else np.array(scores, dtype=float),
        wanted,
    )


def test_the_fewest_nodes_largest_rooms_first_and_the_last_part_where_it_fits_best() -> None:
    planned = _plan([4, 1, 3, 4, 2], [0, 0, 0, 0, 0], 6)
    assert planned is not None
    assert planned.tolist() == [4, 0, 0, 0, 2]  # two nodes; the 2 fill a 2-hole, not a 3


def test_on_equal_room_the_job_stays_where_it_is() -> None:
    planned = _plan([4, 4, 4], [0, 0, 2], 4)
    assert planned is not None and planned.tolist() == [0, 0, 4]
    shrunk = _plan([4, 4, 2], [0, 4, 2], 5)  # shrink 6 -> 5: keep the 4, and 1 of the 2
    assert shrunk is not None and shrunk.tolist() == [0, 4, 1]


def test_it_does_not_fit_or_needs_nothing() -> None:
    assert _plan([1, 1], [0, 0], 3) is None
    planned = _plan([1, 1], [1, 0], 0)
    assert planned is not None and planned.tolist() == [0, 0]


class _Task:
    def __init__(self, index: int, node: int, status: TaskStatus = TaskStatus.RUNNING) -> None:
        self.index, self.node, self.status = index, node, status


def test_a_spread_job_growing_moves_its_stragglers_to_a_whole_node() -> None:
    # 4 nodes of 4 GPUs: the job has one replica on each of nodes 0 and 1 (each node
    # otherwise full); nodes 2 and 3 are idle. Grown to 4, it goes whole onto node 2.
    tasks = [_Task(0, 0), _Task(1, 1)]
    plan = replan(tasks, 4, np.array([0, 0, 4, 4]), np.zeros(4))  # type: ignore[arg-type]
    assert plan is not None
    assert {t.index for t in plan.leaving} == {0, 1}
    assert plan.added.tolist() == [0, 0, 4, 0]


def test_a_shrink_keeps_the_fullest_node_and_the_highest_replicas_leave_each_node() -> None:
    tasks = [_Task(0, 0), _Task(1, 0), _Task(2, 0), _Task(3, 1), _Task(4, 1)]
    plan = replan(tasks, 3, np.array([1, 0]), np.zeros(2))  # type: ignore[arg-type]
    assert plan is not None
    assert [t.index for t in plan.leaving] == [4, 3]
    assert plan.added.tolist() == [0, 0]


@pytest.mark.parametrize("status", [TaskStatus.PENDING, TaskStatus.RELEASING])
def test_a_job_still_placing_or_leaving_is_not_replanned(status: TaskStatus) -> None:
    tasks = [_Task(0, 0), _Task(1, -1 if status is TaskStatus.PENDING else 1, status)]
    assert replan(tasks, 2, np.array([4, 4]), np.zeros(2)) is None  # type: ignore[arg-type]
