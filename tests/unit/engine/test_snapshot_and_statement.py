"""Snapshot construction and statement discard."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.domain.errors import EngineInvariantError, InvalidInput
from phalanx.domain.job import Task, TaskPhase
from phalanx.engine import Snapshot, default_config
from phalanx.engine.cycle import open_session
from phalanx.engine.snapshot import TaskStatus
from tests.builders import make_job, make_node, make_nodes, make_queue


def test_running_and_releasing_tasks_are_charged_to_nodes_and_queues() -> None:
    job = make_job("a", gpus=2, replicas=3, running_on=["n0", "n1"])
    tasks = list(job.tasks)
    tasks[1] = Task(role="worker", index=1, phase=TaskPhase.RELEASING, node="n1")
    from dataclasses import replace

    snap = Snapshot.build(
        nodes=make_nodes(2), queues=[make_queue()], jobs=[replace(job, tasks=tuple(tasks))]
    )
    assert [snap.resources(row).get("gpu") for row in snap.used] == [2, 2]
    assert [snap.resources(row).get("gpu") for row in snap.releasing] == [0, 2]
    # releasing work is already given back to the queue
    assert snap.resources(snap.queues["default"].allocated).get("gpu") == 2
    info = snap.jobs["a"]
    assert info.counts[TaskStatus.RUNNING] == 1 and info.counts[TaskStatus.PENDING] == 1


def test_tasks_on_unknown_nodes_come_back_pending() -> None:
    snap = Snapshot.build(
        nodes=[make_node("n0")], jobs=[make_job("a", running_on=["gone"])], queues=[make_queue()]
    )
    assert snap.jobs["a"].tasks[0].status is TaskStatus.PENDING
    assert snap.used.sum() == 0


def test_jobs_of_unknown_queues_are_orphans() -> None:
    snap = Snapshot.build(
        nodes=[make_node()], queues=[make_queue()], jobs=[make_job("a", queue="nope")]
    )
    assert [(j.name, "does not exist" in why) for j, why in snap.orphans] == [("a", True)]


def test_queue_tree_errors_name_the_queue() -> None:
    with pytest.raises(InvalidInput, match="names parent 'ghost'"):
        Snapshot.build(nodes=[], queues=[make_queue("a", parent="ghost")])
    with pytest.raises(InvalidInput, match="defined twice"):
        Snapshot.build(nodes=[], queues=[make_queue("a"), make_queue("a")])


def test_discard_restores_everything_and_commit_is_once() -> None:
    jobs = [make_job("run", gpus=4, running_on=["n0"]), make_job("new", gpus=2, replicas=2)]
    session = open_session(
        Snapshot.build(nodes=make_nodes(2), queues=[make_queue()], jobs=jobs),
        default_config(),
        now=0.0,
    )
    snap = session.snapshot
    before = (
        snap.used.copy(),
        snap.releasing.copy(),
        snap.pipelined.copy(),
        snap.task_count.copy(),
        snap.queues["default"].allocated.copy(),
    )
    new, run = snap.jobs["new"], snap.jobs["run"]
    with session.statement() as stmt:
        stmt.allocate(new.tasks[0], 1)
        stmt.pipeline(new.tasks[1], 0)
        stmt.evict(run.tasks[0], action="preempt", by="new", reason="test")
        assert snap.used[1].sum() > 0
    after = (
        snap.used,
        snap.releasing,
        snap.pipelined,
        snap.task_count,
        snap.queues["default"].allocated,
    )
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert [t.status for t in new.tasks] == [TaskStatus.PENDING, TaskStatus.PENDING]
    assert run.tasks[0].status is TaskStatus.RUNNING
    stmt2 = session.statement()
    stmt2.commit()
    with pytest.raises(EngineInvariantError):
        stmt2.discard()


def test_evicting_a_pending_task_is_a_bug() -> None:
    session = open_session(
        Snapshot.build(nodes=make_nodes(1), queues=[make_queue()], jobs=[make_job("a")]),
        default_config(),
        now=0.0,
    )
    with session.statement() as stmt, pytest.raises(EngineInvariantError):
        stmt.evict(session.snapshot.jobs["a"].tasks[0], action="preempt", by="x", reason="x")


def test_equal_requests_share_one_row_however_they_are_spelt() -> None:
    # 1 cpu and 1.0004 cpu are both 1000 millicores: one request, one row, one index
    snap = Snapshot.build(
        nodes=make_nodes(2),
        queues=[make_queue()],
        jobs=[make_job("a", cpu=1), make_job("b", cpu=1.0004), make_job("c", cpu=2)],
    )
    a, b, c = (snap.jobs[name].roles[0] for name in "abc")
    assert a.row == b.row != c.row
    assert a.request is b.request and not a.request.flags.writeable
    assert len(snap.requests.rows) == 2
    np.testing.assert_array_equal(snap.requests.table()[c.row], c.request)


def test_a_fork_undoes_moves_and_refuses_changes_it_cannot_undo() -> None:
    snap = Snapshot.build(
        nodes=make_nodes(2), queues=[make_queue()], jobs=[make_job("a", gpus=2, replicas=2)]
    )
    first, second = snap.jobs["a"].tasks
    with snap.forked():
        snap.move(first, TaskStatus.ALLOCATED, 0)
        snap.fork()
        snap.move(second, TaskStatus.ALLOCATED, 1)
        snap.commit()  # kept by the inner fork, still undone by the outer one
        with pytest.raises(EngineInvariantError, match="while the snapshot is forked"):
            snap.remove_job("a")
        with pytest.raises(EngineInvariantError, match="while the snapshot is forked"):
            snap.set_schedulable(0, False)
        assert snap.used[:, snap.dim["gpu"]].tolist() == [2000, 2000]
    assert snap.used.sum() == 0 and snap.cards.whole_free.sum() == 16
    assert [t.status for t in (first, second)] == [TaskStatus.PENDING] * 2
    with pytest.raises(EngineInvariantError, match="without an open fork"):
        snap.revert()
