"""Two queues that must not evict each other cycle after cycle.

The reports volcano#3729, volcano#4947 and kueue#3779: two queues with equal shares and
tasks whose size does not divide the share, so that whichever queue holds the odd
task is "over" its share; a naive reclaim then takes it back and forth forever. Here
every case runs twenty cycles applying evictions and binds: the eviction count must
stop growing after the first reclaim, and no task may be evicted twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from phalanx.domain.queue import Queue
from tests.builders import config, make_job, make_node, make_queue, res
from tests.scenarios.world import World

ACTIONS = ["enqueue", "allocate", "reclaim", "preempt"]


@dataclass(frozen=True)
class Case:
    nodes: tuple[int, ...]  # GPUs per node
    share: float  # each queue's deserved GPUs (capacity) or equal weights (proportion)
    size_a: int  # GPUs per task of queue a's jobs
    size_b: int
    replicas: int = 1  # tasks per job (gang of all)
    quota: str = "capacity"


CASES = {
    "3-gpu-tasks-in-5-gpu-shares": Case(nodes=(10,), share=5, size_a=3, size_b=3),
    "3-gpu-tasks-in-5-gpu-shares-proportion": Case(
        nodes=(10,), share=5, size_a=3, size_b=3, quota="proportion"
    ),
    "2-and-3-gpu-tasks": Case(nodes=(10,), share=5, size_a=2, size_b=3),
    "3-and-5-gpu-tasks-on-two-nodes": Case(nodes=(8, 8), share=8, size_a=3, size_b=5),
    "gangs-of-2x3-on-two-nodes": Case(nodes=(8, 8), share=8, size_a=3, size_b=3, replicas=2),
    "7-gpus-3-gpu-tasks": Case(nodes=(7,), share=3.5, size_a=3, size_b=3),
    "odd-shares-proportion": Case(nodes=(7,), share=3.5, size_a=2, size_b=2, quota="proportion"),
}


def _world(case: Case) -> World:
    if case.quota == "capacity":
        queues: list[Queue] = [
            make_queue("a", deserved=res(gpu=case.share)),
            make_queue("b", deserved=res(gpu=case.share)),
        ]
    else:
        queues = [make_queue("a"), make_queue("b")]
    cfg = config(ACTIONS, ["priority", "gang"], ["drf", "predicates", case.quota, "binpack"])
    nodes = [make_node(f"n{i}", gpus=g) for i, g in enumerate(case.nodes)]
    return World(nodes=nodes, queues=queues, config=cfg)


def _submit(world: World, queue: str, size: int, case: Case, *, at: float) -> None:
    for i in range(8):
        world.submit(
            make_job(f"{queue}{i}", queue=queue, gpus=size, replicas=case.replicas, created=at + i)
        )


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_two_queues_with_equal_shares_do_not_evict_each_other_cycle_after_cycle(
    case: Case,
) -> None:
    world = _world(case)
    _submit(world, "a", case.size_a, case, at=0)
    world.step(0)  # a takes the idle cluster
    _submit(world, "b", case.size_b, case, at=100)

    counts = []
    for t in range(1, 21):
        world.step(float(t))
        counts.append(world.eviction_count())

    assert counts[0] >= 1, "b never reclaimed anything: the case tests nothing"
    assert counts[-1] == counts[0]  # nothing more after the first reclaim
    assert max(world.evictions_per_task().values()) == 1
    assert world.used("b") >= case.size_b * case.replicas  # b runs at least one job


def test_queues_that_keep_submitting_still_settle() -> None:
    case = CASES["3-gpu-tasks-in-5-gpu-shares"]
    world = _world(case)
    _submit(world, "a", 3, case, at=0)
    world.step(0)
    for t in range(1, 21):
        # both queues always have more work waiting
        world.submit(
            make_job(f"a-late{t}", queue="a", gpus=3, created=100 + t),
            make_job(f"b-late{t}", queue="b", gpus=3, created=100 + t),
        )
        world.step(float(t))

    assert world.eviction_count() == 1
    assert (world.used("a"), world.used("b")) in {(6.0, 3.0), (3.0, 6.0)}
