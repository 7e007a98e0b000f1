"""allocate: gang placement in fair-share order, multi-role gangs, pipelining onto releasing room."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from phalanx.domain.job import Job, Role, TaskPhase
from phalanx.engine import Decisions, ReasonCode
from tests.builders import bound, config, cycle, make_job, make_nodes, make_queue, res
from tests.scenarios.world import World

ALLOCATE = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "binpack"])
PROPORTION = config(
    ["allocate"], ["priority", "gang"], ["drf", "predicates", "proportion", "binpack"]
)


def _releasing(name: str, node: str, gpus: float) -> Job:
    """A job whose one task is being stopped on ``node`` (it still holds the node)."""
    job = make_job(name, gpus=gpus, running_on=[node])
    return replace(job, tasks=tuple(replace(t, phase=TaskPhase.RELEASING) for t in job.tasks))


def test_a_job_is_pipelined_onto_resources_being_released_and_starts_once_they_are() -> None:
    leaving = _releasing("leaving", "n0", gpus=8)  # evicted last cycle, still stopping
    waiting = make_job("waiting", gpus=8, created=1)

    decisions = cycle(make_nodes(1), [leaving, waiting], ALLOCATE)

    assert decisions.binds == ()
    assert [(p.job, p.node) for p in decisions.pipelined] == [("waiting", "n0")]

    # next cycle: the releasing task is gone, the pipelined job binds
    assert bound(cycle(make_nodes(1), [waiting], ALLOCATE), "waiting") == ["n0"]


def test_a_pipelined_job_is_told_it_waits_for_resources_being_released() -> None:
    leaving = _releasing("leaving", "n0", gpus=8)
    waiting = make_job("waiting", gpus=8, created=1)

    decisions = cycle(make_nodes(1), [leaving, waiting], ALLOCATE)

    reason = decisions.reason_for("waiting")
    assert reason is not None and reason.code is ReasonCode.WAITING_FOR_RELEASE
    assert "released" in reason.message


def test_pipelined_room_is_not_promised_twice() -> None:
    leaving = _releasing("leaving", "n0", gpus=8)
    jobs = [make_job("first", gpus=8, created=1), make_job("second", gpus=8, created=2)]

    decisions = cycle(make_nodes(1), [leaving, *jobs], ALLOCATE)

    assert [p.job for p in decisions.pipelined] == ["first"]
    reason = decisions.reason_for("second")
    assert reason is not None and reason.code is ReasonCode.INSUFFICIENT


def test_a_multi_role_gang_is_placed_together_master_and_workers() -> None:
    roles = (
        Role(name="master", replicas=1, resources=res(cpu=8, memory_gib=32, gpu=0)),
        Role(name="worker", replicas=2, resources=res(cpu=4, memory_gib=16, gpu=8)),
    )
    job = make_job("mpi", roles=roles)

    decisions = cycle(make_nodes(2), [job], ALLOCATE)

    assert sorted((b.role, b.index) for b in decisions.binds) == [
        ("master", 0),
        ("worker", 0),
        ("worker", 1),
    ]
    assert Counter(b.node for b in decisions.binds if b.role == "worker") == {"n0": 1, "n1": 1}


def test_identical_tasks_of_a_large_job_fill_the_cluster_exactly() -> None:
    job = make_job("wide", gpus=1, replicas=64)

    decisions = cycle(make_nodes(8), [job], ALLOCATE)

    assert Counter(b.node for b in decisions.binds) == {f"n{i}": 8 for i in range(8)}


def test_no_node_is_ever_overcommitted() -> None:
    jobs = [make_job(f"j{i}", gpus=3, cpu=5, created=i) for i in range(12)]

    decisions = cycle(make_nodes(3), jobs, ALLOCATE)  # 16 CPU, 8 GPU per node

    per_node = Counter(b.node for b in decisions.binds)
    assert all(count <= 2 for count in per_node.values())  # 3x3 > 8 GPUs
    assert sum(per_node.values()) == 6


def test_queues_take_turns_by_share() -> None:
    queues = [make_queue("a"), make_queue("b")]
    jobs = [make_job(f"a{i}", queue="a", gpus=1, created=i) for i in range(10)]
    jobs += [make_job(f"b{i}", queue="b", gpus=1, created=100 + i) for i in range(10)]

    decisions = cycle(make_nodes(1), jobs, PROPORTION, queues=queues)

    assert Counter(b.job[0] for b in decisions.binds) == {"a": 4, "b": 4}


def test_same_snapshot_config_and_now_give_the_same_decisions() -> None:
    queues = [make_queue("a"), make_queue("b", weight=2)]
    jobs = [
        make_job(f"{q}{i}", queue=q, gpus=1 + i % 4, replicas=1 + i % 3, created=i % 5)
        for q in "ab"
        for i in range(15)
    ]
    world_cfg = config(
        ["enqueue", "allocate", "reclaim", "preempt", "backfill"],
        ["priority", "gang", "sla"],
        ["drf", "predicates", "proportion", "binpack"],
    )

    runs = [cycle(make_nodes(4), jobs, world_cfg, queues=queues, now=7.0) for _ in range(3)]

    assert runs[0] == runs[1] == runs[2]
    assert runs[0].binds and runs[0].unschedulable


def test_a_world_run_is_reproducible() -> None:
    def run() -> list[Decisions]:
        world = World(nodes=make_nodes(2), queues=[make_queue()], config=ALLOCATE)
        for i in range(6):
            world.submit(make_job(f"j{i}", gpus=4, walltime=10 + i, created=i))
        return world.run([0, 10, 20, 30])

    first = run()
    assert first == run()
    assert sum(len(d.binds) for d in first) == 6  # every job ran, two nodes at a time
