"""Per-GPU state: card shapes, fits, takes and gives, and the snapshot keeping it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.engine import run_cycle
from phalanx.engine.cards import CardDemand, Cards, card_demand
from phalanx.engine.snapshot import Snapshot, TaskStatus
from tests.builders import config, make_job, make_node, make_queue, res

GiB = 2**30
ALLOCATE = config(["allocate"], ["gang", "predicates"])


def _node(name: str = "n0", gpus: int = 4, memory_gib: float = 16) -> Node:
    cards = tuple(Gpu(index=i, memory=memory_gib * GiB) for i in range(gpus))
    capacity = res(64, 256, gpus) + Resources.of({"gpu-memory": gpus * memory_gib * GiB})
    return Node(name=name, capacity=capacity, gpus=cards)


def test_card_shapes() -> None:
    assert card_demand(0, 0) is None
    assert card_demand(500, 0) == CardDemand(whole=0, milli=500, memory=0)
    assert card_demand(0, 10 * GiB) == CardDemand(whole=0, milli=0, memory=10 * GiB)
    assert card_demand(2000, 0) == CardDemand(whole=2, milli=0, memory=0)
    assert card_demand(1000, 0) == CardDemand(whole=1, milli=0, memory=0)
    with pytest.raises(ValueError, match=r"1\.5 GPUs"):
        card_demand(1500, 0)


def test_shares_add_up_on_one_card_and_whole_cards_need_untouched_ones() -> None:
    cards = Cards([_node(gpus=2)])
    share = CardDemand(whole=0, milli=600, memory=0)
    cards.take(share, 0, (0,))
    assert cards.fitting(share, 0).tolist() == [1]  # 400 left on card 0: too little
    assert cards.room(share, 0) == 1
    whole = CardDemand(whole=1, milli=0, memory=0)
    assert cards.first_fit(whole, 0) == (1,)
    assert not cards.fits(CardDemand(whole=2, milli=0, memory=0), slice(None))[0]
    cards.give(share, 0, (0,))
    assert cards.fits(CardDemand(whole=2, milli=0, memory=0), slice(None))[0]


def test_a_cards_memory_is_never_exceeded() -> None:
    cards = Cards([_node(gpus=1, memory_gib=16)])
    ten = CardDemand(whole=0, milli=0, memory=10 * GiB)
    cards.take(ten, 0, (0,))
    assert cards.first_fit(ten, 0) is None
    assert cards.first_fit(CardDemand(whole=0, milli=0, memory=6 * GiB), 0) == (0,)
    assert cards.first_fit(CardDemand(whole=1, milli=0, memory=0), 0) is None  # memory is shared


def test_memory_shares_do_not_fit_cards_of_unknown_memory() -> None:
    cards = Cards([make_node("n0", gpus=2)])  # capacity only: 2 cards, memory unknown
    assert cards.count.tolist() == [2]
    assert cards.first_fit(CardDemand(whole=0, milli=0, memory=GiB), 0) is None
    assert cards.first_fit(CardDemand(whole=0, milli=500, memory=0), 0) == (0,)


def test_serves_refuses_repeats_absent_and_busy_cards() -> None:
    cards = Cards([_node(gpus=2), _node("n1", gpus=4)])
    whole2 = CardDemand(whole=2, milli=0, memory=0)
    assert cards.serves(whole2, 0, (0, 1))
    assert not cards.serves(whole2, 0, (0, 0))
    assert not cards.serves(whole2, 0, (1, 2))  # node 0 has 2 cards
    assert cards.milli_free.shape == (2, 4)
    cards.take(whole2, 1, (2, 3))
    assert not cards.serves(whole2, 1, (1, 2))
    assert cards.whole_free.tolist() == [2, 2]


def test_snapshot_holds_the_cards_of_running_tasks_and_frees_them_on_leaving() -> None:
    running = make_job("run", gpus=0.5, running_on=["n0"])
    snap = Snapshot.build(nodes=[_node()], queues=[make_queue()], jobs=[running])
    task = snap.jobs["run"].tasks[0]
    assert task.gpus == (0,)
    assert snap.cards.milli_free[0].tolist() == [500, 1000, 1000, 1000]
    snap.move(task, TaskStatus.RELEASING)
    assert task.gpus == (0,)  # still on the node until it is gone
    snap.move(task, TaskStatus.PENDING)
    assert task.gpus == ()
    assert snap.cards.milli_free[0].tolist() == [1000] * 4


def test_recorded_card_ids_are_kept_when_they_serve() -> None:
    job = make_job("run", gpus=2, running_on=["n0"])
    job = replace(job, tasks=tuple(replace(t, gpus=(2, 3)) for t in job.tasks))
    snap = Snapshot.build(nodes=[_node()], queues=[make_queue()], jobs=[job])
    assert snap.jobs["run"].tasks[0].gpus == (2, 3)
    assert snap.cards.whole_free.tolist() == [2]


def test_binds_name_cards_and_shares_fill_a_card_before_opening_the_next() -> None:
    jobs = [make_job(f"s{i}", gpus=0.25, created=i) for i in range(5)]
    snap = Snapshot.build(nodes=[_node()], queues=[make_queue()], jobs=jobs)
    decisions = run_cycle(snap, ALLOCATE, now=0.0)
    cards = {b.job: b.gpus for b in decisions.binds}
    assert cards == {"s0": (0,), "s1": (0,), "s2": (0,), "s3": (0,), "s4": (1,)}


def test_a_whole_gpu_task_waits_when_free_gpu_is_split_across_shared_cards() -> None:
    shares = [make_job(f"s{i}", gpus=0.5, running_on=["n0"]) for i in range(2)]
    shares = [
        replace(j, tasks=tuple(replace(t, gpus=(i,)) for t in j.tasks))
        for i, j in enumerate(shares)
    ]
    whole = make_job("whole", gpus=1, created=5)
    snap = Snapshot.build(nodes=[_node(gpus=2)], queues=[make_queue()], jobs=[*shares, whole])
    decisions = run_cycle(snap, ALLOCATE, now=0.0)
    assert not decisions.binds
    (why,) = decisions.unschedulable
    assert "none has cards for 1 whole GPU" in why.reason.message
    assert np.array_equal(snap.cards.milli_free[0], [500, 500])


def test_a_gpu_count_above_one_that_is_not_whole_is_invalid() -> None:
    snap = Snapshot.build(nodes=[_node()], queues=[make_queue()], jobs=[make_job("odd", gpus=1.5)])
    ((job, why),) = snap.orphans
    assert job.name == "odd"
    assert "1.5 GPUs" in why
    assert "fix:" in why
