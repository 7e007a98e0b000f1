"""A session keeps each job's order key until a task moves or enqueue admits a job."""

from __future__ import annotations

from phalanx.domain.job import JobPhase
from phalanx.engine import Snapshot
from phalanx.engine.cycle import open_session
from tests.builders import config, make_job, make_nodes, make_queue


def _snapshot() -> Snapshot:
    jobs = [
        make_job("small", gpus=1, created=1.0, phase=JobPhase.PENDING),
        make_job("big", gpus=4, created=2.0, phase=JobPhase.PENDING),
    ]
    return Snapshot.build(nodes=make_nodes(2), queues=[make_queue("default")], jobs=jobs)


def test_a_job_key_follows_the_moves_of_tasks() -> None:
    snapshot = _snapshot()
    session = open_session(snapshot, config(["allocate"], ["gang", "drf"]), now=0.0)
    big = snapshot.jobs["big"]
    before = session.job_key(big)
    assert session.job_key(big) is before  # kept: nothing moved

    with session.statement() as stmt:  # drf's key is the job's dominant share
        stmt.allocate(big.tasks[0], 0)
        placed = session.job_key(big)
        assert placed != before
        assert placed == session.points.job_order.key(big)
        stmt.discard()

    assert session.job_key(big) == before  # undone: the key is what it was


def test_a_job_key_is_read_again_after_an_admission() -> None:
    snapshot = _snapshot()
    session = open_session(snapshot, config(["enqueue", "allocate"], ["gang", "drf"]), now=0.0)
    small = snapshot.jobs["small"]
    before = session.job_key(small)
    session.admitted.append("small")

    assert session.job_key(small) is not before
    assert session.job_key(small) == session.points.job_order.key(small)
