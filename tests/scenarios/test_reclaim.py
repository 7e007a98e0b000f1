"""reclaim: a queue below its deserved share takes back what other queues borrowed.

Queues here use the capacity plugin with shares written only for GPUs, as people
write them (``deserved: {gpu: 8}``).
"""

from __future__ import annotations

from phalanx.domain.job import Job
from tests.builders import config, cycle, evicted, make_job, make_node, make_nodes, make_queue, res
from tests.scenarios.world import World

RECLAIM = config(
    ["allocate", "reclaim"], ["priority", "gang"], ["drf", "predicates", "capacity", "binpack"]
)


def _settle(world: World, start: float, cycles: int = 8) -> list[int]:
    """Run ``cycles`` cycles one second apart; the running eviction count after each."""
    counts = []
    for k in range(cycles):
        world.step(start + k)
        counts.append(world.eviction_count())
    return counts


def _jobs(queue: str, count: int, *, gpus: float, created: float) -> list[Job]:
    return [
        make_job(f"{queue}{i}", queue=queue, gpus=gpus, created=created + i) for i in range(count)
    ]


def test_three_queues_reclaim_gives_each_exactly_its_deserved_share() -> None:
    queues = [
        make_queue("a", deserved=res(gpu=16)),
        make_queue("b", deserved=res(gpu=8)),
        make_queue("c", deserved=res(gpu=8)),
    ]
    world = World(nodes=make_nodes(4), queues=queues, config=RECLAIM)  # 32 GPUs
    world.submit(*_jobs("a", 16, gpus=2, created=0))
    world.step(0)
    assert world.used("a") == 32  # a borrowed the whole idle cluster

    world.submit(*_jobs("b", 8, gpus=2, created=10), *_jobs("c", 8, gpus=2, created=20))
    counts = _settle(world, 10)

    assert {q: world.used(q) for q in "abc"} == {"a": 16, "b": 8, "c": 8}
    assert counts[-1] == counts[1] == 8  # exactly a's borrowed 16 GPUs, once
    assert max(world.evictions_per_task().values()) == 1
    # b's jobs beyond its share are told why reclaim does not help them
    reason = world.history[-1][1].reason_for("b7")
    assert reason is not None and reason.queue == "b"
    assert "queue b already has its deserved share (8 GPUs)" in reason.message


def test_reclaim_takes_only_from_queues_above_their_deserved_share() -> None:
    queues = [
        make_queue("lender", deserved=res(gpu=8)),
        make_queue("borrower", deserved=res(gpu=4)),
        make_queue("late", deserved=res(gpu=4)),
    ]
    jobs = [
        *(make_job(f"lender{i}", queue="lender", gpus=4, running_on=[f"n{i}"]) for i in range(2)),
        *(
            make_job(f"borrower{i}", queue="borrower", gpus=4, running_on=[f"n{i}"])
            for i in range(2)
        ),
        make_job("late0", queue="late", gpus=4, created=5),
    ]

    decisions = cycle(make_nodes(2), jobs, RECLAIM, queues=queues, now=10)

    assert [e.job for e in decisions.evictions] == ["borrower0"]
    assert [(p.job, p.node) for p in decisions.pipelined] == [("late0", "n0")]
    assert decisions.evictions[0].action == "reclaim" and decisions.evictions[0].by == "late0"


def test_reclaim_never_pushes_a_victim_queue_below_its_guarantee() -> None:
    nodes = [make_node("n0", gpus=6), make_node("n1", gpus=6)]
    running = [make_job(f"a{i}", queue="a", gpus=6, running_on=[f"n{i}"]) for i in range(2)]
    claim = make_job("b0", queue="b", gpus=6, created=5)
    guarded = [make_queue("a", deserved=res(gpu=6), guarantee=res(gpu=8))]
    plain = [make_queue("a", deserved=res(gpu=6))]
    b = [make_queue("b", deserved=res(gpu=6))]

    # a holds 12 with a guarantee of 8: evicting a 6-GPU task would leave it at 6
    assert evicted(cycle(nodes, [*running, claim], RECLAIM, queues=guarded + b, now=10)) == []
    # without the guarantee the same eviction is allowed
    assert evicted(cycle(nodes, [*running, claim], RECLAIM, queues=plain + b, now=10)) == [
        "a0-worker-0"
    ]


def test_a_queue_marked_not_reclaimable_is_never_a_victim() -> None:
    queues = [
        make_queue("keeper", deserved=res(gpu=4), reclaimable=False),
        make_queue("b", deserved=res(gpu=12)),
    ]
    jobs = [
        *(make_job(f"k{i}", queue="keeper", gpus=8, running_on=[f"n{i}"]) for i in range(2)),
        make_job("b0", queue="b", gpus=8, created=5),
    ]

    decisions = cycle(make_nodes(2), jobs, RECLAIM, queues=queues, now=10)

    assert decisions.evictions == ()
    assert decisions.reason_for("b0") is not None


def test_reclaim_evicts_nothing_when_the_reclaimers_gang_cannot_be_completed() -> None:
    queues = [make_queue("a", deserved=res(gpu=8)), make_queue("b", deserved=res(gpu=8))]
    jobs = [
        *(make_job(f"a{i}", queue="a", gpus=1, running_on=[f"n{i // 8}"]) for i in range(16)),
        # 12 GPUs together is more than b deserves: no partial reclaim for it
        make_job("big", queue="b", gpus=4, replicas=3, created=5),
    ]

    decisions = cycle(make_nodes(2), jobs, RECLAIM, queues=queues, now=10)

    assert decisions.evictions == ()
    assert decisions.pipelined == ()


def test_reclaim_evicts_no_more_than_the_reclaimer_then_places() -> None:
    queues = [make_queue("a", deserved=res(gpu=8)), make_queue("b", deserved=res(gpu=8))]
    jobs = [
        *(make_job(f"a{i}", queue="a", gpus=1, running_on=[f"n{i // 8}"]) for i in range(16)),
        make_job("gang", queue="b", gpus=3, replicas=2, created=5),
    ]

    decisions = cycle(make_nodes(2), jobs, RECLAIM, queues=queues, now=10)

    assert len(decisions.evictions) == 6  # 2 x 3 GPUs freed, one GPU per victim
    assert {e.node for e in decisions.evictions} == {p.node for p in decisions.pipelined}
    assert len(decisions.pipelined) == 2


def test_reclaimed_tasks_start_in_the_next_cycle_once_released() -> None:
    queues = [make_queue("a", deserved=res(gpu=8)), make_queue("b", deserved=res(gpu=8))]
    world = World(nodes=make_nodes(2), queues=queues, config=RECLAIM)
    world.submit(*_jobs("a", 4, gpus=4, created=0))
    world.step(0)
    world.submit(make_job("b0", queue="b", gpus=8, created=1))

    first = world.step(1)
    second = world.step(2)

    assert len(first.evictions) == 2 and [p.job for p in first.pipelined] == ["b0"]
    assert [b.job for b in second.binds] == ["b0"]
    assert second.evictions == ()
