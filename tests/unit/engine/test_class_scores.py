"""ClassScores: a class's node scores kept through a session, re-scored where usage changed."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from phalanx.engine import Snapshot
from phalanx.engine.framework import scores as scores_module
from phalanx.engine.framework.extension import ScorePoint
from phalanx.engine.framework.scores import ClassScores
from phalanx.engine.snapshot import TaskInfo, TaskStatus
from tests.builders import make_job, make_nodes, make_queue


def _setup(per_class: bool) -> tuple[Snapshot, ClassScores, list[list[int]], list[TaskInfo]]:
    snapshot = Snapshot.build(
        nodes=make_nodes(4),
        queues=[make_queue()],
        jobs=[make_job("a", gpus=0, replicas=2), make_job("b", gpus=0, replicas=1)],
    )
    asked: list[list[int]] = []

    def free_cpu(task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        asked.append(nodes.tolist())
        column = snapshot.dim["cpu"]
        free: NDArray[np.float64] = snapshot.capacity[nodes, column] - snapshot.used[nodes, column]
        return free

    point = ScorePoint("node_score")
    point.add("free", 0, free_cpu, per_class=per_class)
    tasks = [t for job in snapshot.jobs.values() for t in job.tasks]
    scores = ClassScores(snapshot)
    scores.open(point)
    return snapshot, scores, asked, tasks


def test_a_class_is_scored_again_only_on_the_nodes_whose_usage_changed() -> None:
    snapshot, scores, asked, tasks = _setup(per_class=True)
    every = np.arange(4)
    assert scores(tasks[0], every).tolist() == [16000.0] * 4
    assert scores(tasks[2], every).tolist() == [16000.0] * 4  # job b: the same class
    assert asked == [[0, 1, 2, 3]]

    snapshot.move(tasks[0], TaskStatus.ALLOCATED, 2)
    assert scores(tasks[1], every).tolist() == [16000.0, 16000.0, 15000.0, 16000.0]
    assert asked[1:] == [[2]]
    assert scores(tasks[1], np.array([3, 2])).tolist() == [16000.0, 15000.0]
    assert len(asked) == 2


def test_without_the_promise_every_call_scores_afresh() -> None:
    _, scores, asked, tasks = _setup(per_class=False)
    scores(tasks[0], np.arange(4))
    scores(tasks[0], np.arange(4))
    assert asked == [[0, 1, 2, 3], [0, 1, 2, 3]]


def test_kept_scores_stand_into_the_next_session_only_on_the_same_basis() -> None:
    _, scores, _, tasks = _setup(per_class=True)
    basis = ["target-1"]
    scored: list[str] = []

    def next_session() -> None:
        def by_target(task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
            scored.append(basis[0])
            return np.full(len(nodes), 1.0 if basis[0] == "target-1" else 2.0)

        point = ScorePoint("node_score")
        point.add("fgd", 0, by_target, per_class=True, basis=lambda: basis[0])
        scores.open(point)

    next_session()
    assert scores(tasks[0], np.arange(4)).tolist() == [1.0] * 4
    next_session()  # the same basis, no node changed: nothing is scored again
    assert scores(tasks[0], np.arange(4)).tolist() == [1.0] * 4
    basis[0] = "target-2"
    next_session()
    assert scores(tasks[0], np.arange(4)).tolist() == [2.0] * 4
    assert scored == ["target-1", "target-2"]


def test_only_the_most_recently_used_classes_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scores_module, "CLASSES_KEPT", 1)
    _, scores, asked, tasks = _setup(per_class=True)
    scores(tasks[0], np.arange(2))  # job a's class
    scores(tasks[2], np.arange(2))  # job b's: the same request row, the same class
    assert len(asked) == 1
    other = make_job("c", gpus=0, cpu=2)
    snapshot = scores.snapshot
    info = snapshot.add_job(other)
    assert info is not None
    scores(info.tasks[0], np.arange(2))  # another class: a's is dropped
    scores(tasks[0], np.arange(2))
    assert len(asked) == 3
