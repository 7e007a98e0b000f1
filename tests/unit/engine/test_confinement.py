"""The ``confinement`` point: gangs confined to offered node masks, tried in order; groups;
statement savepoints."""

from __future__ import annotations

import numpy as np

from phalanx.engine import Snapshot
from phalanx.engine.actions.preempt import evict_for_gang
from phalanx.engine.cycle import open_session
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.confinement import Confinement, ConfinementOffer, ConfinementQuery
from phalanx.engine.framework.extension import FirstPoint
from phalanx.engine.framework.session import Session
from phalanx.engine.placement.jobs import try_job
from phalanx.engine.snapshot import EVICTABLE, JobInfo, TaskInfo, TaskStatus
from tests.builders import config, make_job, make_nodes, make_queue

CONFIG = config(["allocate"], ["gang", "predicates", "binpack"])


def session_of(nodes: int, *jobs: object) -> Session:
    snapshot = Snapshot.build(
        nodes=make_nodes(nodes, gpus=8),
        queues=[make_queue()],
        jobs=jobs,  # type: ignore[arg-type]
    )
    return open_session(snapshot, CONFIG, now=0.0)


def mask(size: int, *nodes: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.bool_)
    out[list(nodes)] = True
    return out


def nodes_of(job: JobInfo) -> list[int]:
    return sorted(t.node for t in job.tasks)


def confine(session: Session, rule: Confinement | None) -> list[ConfinementQuery]:
    """Register ``rule`` for every job; return the queries the offers were made for."""
    queries: list[ConfinementQuery] = []

    def recorded(query: ConfinementQuery) -> ConfinementOffer:
        queries.append(query)
        assert rule is not None
        return rule.offer(query)

    wrapped = None if rule is None else Confinement(key=rule.key, offer=recorded, group=rule.group)
    session.points.confinement.register("test", 0, lambda job: wrapped)
    return queries


def test_first_point_takes_the_first_answer() -> None:
    point: FirstPoint[[int], str] = FirstPoint("p")
    assert point(1) is None
    point.register("a", 0, lambda x: None)
    point.register("b", 0, lambda x: f"b{x}")
    point.register("c", 0, lambda x: "c")
    assert point(1) == "b1"


def test_the_first_mask_the_gang_fits_in_wins() -> None:
    session = session_of(6, make_job("g", gpus=8, replicas=2))
    offer = ConfinementOffer(masks=(mask(6, 0), mask(6, 3, 4), mask(6, 1, 2)))
    confine(session, Confinement(key="k", offer=lambda q: offer))
    job = session.snapshot.jobs["g"]
    assert try_job(session, job)
    assert nodes_of(job) == [3, 4]  # node 0 alone cannot hold two 8-GPU tasks


def test_a_failed_offer_leaves_the_snapshot_and_names_the_reason() -> None:
    session = session_of(4, make_job("g", gpus=8, replicas=3))
    used = session.snapshot.used.copy()
    refusal = Reason(code=ReasonCode.GANG, message="no switch fits")
    offer = ConfinementOffer(masks=(mask(4, 0, 1), mask(4, 2)), reason=refusal)
    confine(session, Confinement(key="k", offer=lambda q: offer))
    job = session.snapshot.jobs["g"]
    assert not try_job(session, job)
    assert np.array_equal(session.snapshot.used, used)
    assert all(t.status is TaskStatus.PENDING for t in job.tasks)
    assert "only 1 fit" in session.reasons["g"].message  # the last attempt's shortage
    empty = ConfinementOffer(masks=(), reason=refusal)
    other = session_of(4, make_job("g", gpus=8, replicas=3))
    confine(other, Confinement(key="k", offer=lambda q: empty))
    assert not try_job(other, other.snapshot.jobs["g"])
    assert other.reasons["g"] is refusal


def test_groups_are_offered_one_by_one_and_see_what_earlier_groups_took() -> None:
    session = session_of(4, make_job("g", gpus=4, replicas=4))

    def offer(query: ConfinementQuery) -> ConfinementOffer:
        room = query.free[:, session.snapshot.dim["gpu"]]
        best = int(np.argmax(room >= 8000))  # the first node with room for two 4-GPU tasks
        return ConfinementOffer(masks=(mask(4, best),))

    queries = confine(session, Confinement(key="k", offer=offer, group=2))
    job = session.snapshot.jobs["g"]
    assert try_job(session, job)
    assert nodes_of(job) == [0, 0, 1, 1]
    assert [[t.index for t in q.tasks] for q in queries] == [[0, 1], [2, 3]]


def test_a_group_that_fits_nowhere_undoes_the_whole_gang() -> None:
    session = session_of(2, make_job("g", gpus=4, replicas=6))
    used = session.snapshot.used.copy()
    offer = ConfinementOffer(masks=(mask(2, 0), mask(2, 1)))
    confine(session, Confinement(key="k", offer=lambda q: offer, group=3))
    job = session.snapshot.jobs["g"]
    assert not try_job(session, job)
    assert np.array_equal(session.snapshot.used, used)
    assert "group 1 of 2" in session.reasons["g"].message


def test_the_failure_memo_is_keyed_by_the_rule() -> None:
    session = session_of(2, make_job("a", gpus=8, replicas=2), make_job("b", gpus=8, replicas=2))
    keys = iter(["narrow", "wide"])
    offers = {
        "narrow": ConfinementOffer(masks=(mask(2, 0),)),
        "wide": ConfinementOffer(masks=(mask(2, 0, 1),)),
    }

    def rule(job: JobInfo) -> Confinement:
        key = next(keys)
        return Confinement(key=key, offer=lambda q: offers[key])

    session.points.confinement.register("test", 0, rule)
    assert not try_job(session, session.snapshot.jobs["a"])
    assert try_job(session, session.snapshot.jobs["b"])  # same gang shape, another rule


def test_rollback_to_a_savepoint_keeps_what_came_before() -> None:
    session = session_of(2, make_job("g", gpus=2, replicas=3))
    tasks = session.snapshot.jobs["g"].tasks
    with session.statement() as stmt:
        stmt.allocate(tasks[0], 0)
        used = session.snapshot.used.copy()
        mark = stmt.savepoint()
        stmt.allocate(tasks[1], 1)
        stmt.pipeline(tasks[2], 1)
        stmt.rollback(mark)
        assert np.array_equal(session.snapshot.used, used)
        assert [t.status for t in tasks] == [
            TaskStatus.ALLOCATED,
            TaskStatus.PENDING,
            TaskStatus.PENDING,
        ]
        assert session.snapshot.pipelined.sum() == 0
    assert session.snapshot.used.sum() == 0


def test_evictions_make_room_only_where_the_rule_allows() -> None:
    """Victim order alone would evict on n0; the rule's ``evict_within`` says n2."""
    low = [make_job(f"low{i}", gpus=8, running_on=[f"n{i}"], created=i) for i in range(3)]
    high = make_job("high", gpus=8, priority=10, created=5)
    snapshot = Snapshot.build(nodes=make_nodes(3, gpus=8), queues=[make_queue()], jobs=[*low, high])
    session = open_session(
        snapshot, config(["allocate", "preempt"], ["priority", "gang", "predicates"]), now=0.0
    )
    asked: list[ConfinementQuery] = []

    def within(query: ConfinementQuery) -> np.ndarray:
        asked.append(query)
        return mask(3, 2)

    session.points.confinement.register(
        "test",
        0,
        lambda job: Confinement(
            key="k", offer=lambda q: ConfinementOffer(masks=()), evict_within=within
        ),
    )

    def victims(job: JobInfo) -> list[TaskInfo]:
        return [
            t
            for other in session.snapshot.jobs.values()
            if other is not job
            for t in other.tasks
            if t.status in EVICTABLE
        ]

    assert evict_for_gang(session, snapshot.jobs["high"], victims, action="preempt")
    assert [t.status for t in snapshot.jobs["low2"].tasks] == [TaskStatus.RELEASING]
    assert all(
        t.status is TaskStatus.RUNNING for j in ("low0", "low1") for t in snapshot.jobs[j].tasks
    )
    assert [t.name for q in asked for t in q.tasks] == ["high-worker-0"]
