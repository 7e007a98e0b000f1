"""Cordoned cards (``Node.cordoned_gpus``): offered to no new task, kept by the tasks that
hold them, out of the node's capacity, and named in the reason they are why a task waits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pytest

from phalanx.domain.cells import NodeCells, derive_levels
from phalanx.domain.job import Job
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import preset
from phalanx.engine import run_cycle
from phalanx.engine.cards import ABSENT, WHOLE, CardDemand, Cards
from phalanx.engine.cycle import open_session
from phalanx.engine.snapshot import Snapshot, TaskStatus
from tests.builders import config, make_job, make_node, make_queue, res

GiB = 2**30
WHOLE1 = CardDemand(whole=1, milli=0, memory=0)
SHARE = CardDemand(whole=0, milli=500, memory=0)


def _node(name: str = "n0", gpus: int = 4, *cordoned: int, memory_gib: float = 16) -> Node:
    cards = tuple(Gpu(index=i, memory=memory_gib * GiB) for i in range(gpus))
    capacity = res(64, 256, gpus) + Resources.of({"gpu-memory": gpus * memory_gib * GiB})
    return Node(name=name, capacity=capacity, gpus=cards, cordoned_gpus=frozenset(cordoned))


def _holding(job: Job, *gpus: tuple[int, ...]) -> Job:
    """``job`` (running) with its tasks holding these cards."""
    return replace(
        job, tasks=tuple(replace(t, gpus=g) for t, g in zip(job.tasks, gpus, strict=False))
    )


def _card_state(cards: Cards) -> list[np.ndarray]:
    return [a.copy() for a in (cards.milli_free, cards.memory_free, cards.whole_free)]


# -- Cards ---------------------------------------------------------------------------------


def test_a_cordoned_card_is_offered_to_no_new_task() -> None:
    cards = Cards([_node("n0", 4, 1)])
    assert cards.any_cordoned
    assert cards.usable(WHOLE1, slice(None))[0].tolist() == [True, False, True, True]
    assert cards.fitting(SHARE, 0).tolist() == [0, 2, 3]
    assert cards.first_fit(CardDemand(whole=2, milli=0, memory=0), 0) == (0, 2)
    assert cards.first_fit(CardDemand(whole=4, milli=0, memory=0), 0) is None
    assert cards.whole_free.tolist() == [3]
    assert cards.fits(CardDemand(whole=3, milli=0, memory=0), slice(None)).tolist() == [True]
    assert cards.fits(CardDemand(whole=4, milli=0, memory=0), slice(None)).tolist() == [False]
    assert cards.room(SHARE, 0) == 6  # two halves on each of three cards
    assert cards.open_milli(slice(None))[0].tolist() == [WHOLE, ABSENT, WHOLE, WHOLE]
    assert cards.milli_free[0].tolist() == [WHOLE] * 4  # the truth: nobody holds it
    assert not cards.serves(WHOLE1, 0, (1,))
    assert cards.serves(WHOLE1, 0, (1,), cordoned=True)  # for a task that holds it already


def test_without_a_cordon_the_open_view_is_the_free_amounts() -> None:
    cards = Cards([_node("n0", 2)])
    assert not cards.any_cordoned
    assert cards.open_milli(slice(None)) is not None
    assert np.array_equal(cards.open_milli(slice(None)), cards.milli_free)
    assert cards.offered.all()


def test_a_holder_of_a_cordoned_card_takes_and_gives_it_exactly_and_frees_nothing() -> None:
    cards = Cards([_node("n0", 4, 1)])
    before = _card_state(cards)
    cards.take(WHOLE1, 0, (1,))
    assert cards.whole_free.tolist() == [3]  # it was never counted free
    cards.take(SHARE, 0, (2,))
    assert cards.whole_free.tolist() == [2]
    cards.give(SHARE, 0, (2,))
    cards.give(WHOLE1, 0, (1,))
    for was, now in zip(before, _card_state(cards), strict=True):
        assert np.array_equal(was, now)
    assert not cards.usable(WHOLE1, slice(None))[0][1]  # given back, still cordoned
    cards.take(SHARE, 0, (1,))  # a share read in on the cordoned card
    assert cards.room(SHARE, 0) == 6
    cards.give(SHARE, 0, (1,))
    for was, now in zip(before, _card_state(cards), strict=True):
        assert np.array_equal(was, now)


# -- the snapshot ----------------------------------------------------------------------------


def test_cordoned_cards_leave_the_node_capacity_and_the_total() -> None:
    listed = _node("n0", 4, 1, 2, memory_gib=16)
    bare = replace(make_node("n1", gpus=8), cordoned_gpus=frozenset({3}))
    memory_only = Node(
        name="n2",
        capacity=res(8, 32, 2) + Resources.of({"gpu-memory": 2 * 10 * GiB}),
        cordoned_gpus=frozenset({0}),
    )
    snap = Snapshot.build(nodes=[listed, bare, memory_only], queues=[make_queue()])
    gpu, memory = snap.dim["gpu"], snap.dim["gpu-memory"]
    assert snap.capacity[:, gpu].tolist() == [2000, 7000, 1000]
    assert snap.capacity[:, memory].tolist() == [32 * GiB, 0, 10 * GiB]
    assert snap.cordoned[:, gpu].tolist() == [2000, 1000, 1000]
    assert snap.total[gpu] == 10000
    assert snap.capacity[:, snap.dim["cpu"]].tolist() == [64000, 16000, 8000]  # the rest stays


def test_no_cordon_leaves_the_capacity_as_the_node_gives_it() -> None:
    snap = Snapshot.build(nodes=[make_node("n0", gpus=8)], queues=[make_queue()])
    assert snap.capacity[0, snap.dim["gpu"]] == 8000
    assert not snap.cordoned.any()


def test_running_tasks_keep_the_cordoned_cards_they_hold_and_still_count_as_using_them() -> None:
    whole = _holding(make_job("whole", gpus=2, running_on=["n0"]), (2, 3))
    share = _holding(make_job("share", gpus=0.5, running_on=["n0"]), (1,))
    unnamed = make_job("unnamed", gpus=1, running_on=["n0"])  # its cards were never recorded
    snap = Snapshot.build(
        nodes=[_node("n0", 8, 1, 3)], queues=[make_queue()], jobs=[whole, share, unnamed]
    )
    assert snap.jobs["whole"].tasks[0].gpus == (2, 3)
    assert snap.jobs["share"].tasks[0].gpus == (1,)
    assert snap.jobs["unnamed"].tasks[0].gpus == (0,)  # the lowest card not cordoned
    assert snap.cards.whole_free.tolist() == [4]  # 4..7
    gpu = snap.dim["gpu"]
    assert snap.used[0, gpu] == 3500  # Kubernetes: requested counts them
    assert snap.idle[0, gpu] == 6000 - 3500


def test_an_undone_move_gives_a_task_back_its_cordoned_card() -> None:
    running = _holding(make_job("run", gpus=1, running_on=["n0"]), (1,))
    snap = Snapshot.build(nodes=[_node("n0", 4, 1)], queues=[make_queue()], jobs=[running])
    task = snap.jobs["run"].tasks[0]
    before = _card_state(snap.cards)
    with snap.forked():
        snap.move(task, TaskStatus.PENDING)
        assert not task.gpus
        assert snap.cards.whole_free.tolist() == [3]  # card 1 left, and is still not free
    assert task.gpus == (1,)
    for was, now in zip(before, _card_state(snap.cards), strict=True):
        assert np.array_equal(was, now)


def test_a_task_a_session_places_never_gets_a_cordoned_card_it_is_handed() -> None:
    snap = Snapshot.build(
        nodes=[_node("n0", 4, 0)], queues=[make_queue()], jobs=[make_job("new", gpus=1)]
    )
    task = snap.jobs["new"].tasks[0]
    snap.move(task, TaskStatus.ALLOCATED, 0, (0,))
    assert task.gpus == (1,)
    snap.move(task, TaskStatus.PENDING)
    snap.move(task, TaskStatus.BOUND, 0, (0,))  # a driver's report: it holds card 0
    assert task.gpus == (0,)


# -- every plugin that picks cards or reads them --------------------------------------------

GPU_PLUGINS: Mapping[str, Mapping[str, object]] = {
    "binpack": {},
    "gpu-topology": {},
    "gpu-share": {},
    "random": {"seed": 3},
    "bestfit": {},
    "dotprod": {},
    "gpupacking": {},
    "gpuclustering": {},
    "fgd": {"workload": [{"gpu": 0.5, "popularity": 1}, {"gpu": 2, "popularity": 1}]},
}


@pytest.mark.parametrize("plugin", sorted(GPU_PLUGINS))
def test_no_plugin_gives_a_new_task_a_cordoned_card(plugin: str) -> None:
    dgx = preset("dgx1-v100")
    cards = tuple(
        Gpu(index=i, memory=16 * GiB, numa=dgx.numa[i], nvlink_peers=dgx.nvlink_peers(i))
        for i in range(8)
    )
    capacity = res(96, 512, 8) + Resources.of({"gpu-memory": 8 * 16 * GiB})
    nodes = [
        Node(
            name=f"d{k}",
            capacity=capacity,
            gpus=cards,
            gpu_topology=dgx,
            cordoned_gpus=frozenset({0, 5}),
        )
        for k in range(2)
    ]
    busy = _holding(make_job("busy", gpus=1, running_on=["d0"]), (0,))
    jobs = [
        busy,
        *(make_job(f"s{i}", gpus=0.5, created=1 + i) for i in range(6)),
        *(make_job(f"w{i}", gpus=2, created=10 + i) for i in range(4)),
        make_job("one", gpus=1, created=20),
    ]
    cfg = config(["allocate"], ["gang", "predicates"], [(plugin, dict(GPU_PLUGINS[plugin]))])
    snap = Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=jobs)
    decisions = run_cycle(snap, cfg, now=0.0)
    # 11 GPUs are offered (6 cards a node, one GPU held on d0's cordoned card) of 12 asked
    assert len(decisions.binds) >= 9
    for bind in decisions.binds:
        assert not {0, 5} & set(bind.gpus), bind


def test_hived_plans_no_cell_with_a_cordoned_card_now_or_once_work_is_evicted() -> None:
    dgx = preset("dgx1-v100")
    node = Node(
        name="dgx-0",
        capacity=res(64, 512, 8),
        gpus=tuple(Gpu(index=i, numa=dgx.numa[i]) for i in range(8)),
        gpu_topology=dgx,
        cells=NodeCells(levels=derive_levels(8, dgx, "dgx1")),
        cordoned_gpus=frozenset({2}),
    )
    cfg = config(["allocate", "reclaim", "preempt"], ["priority", "gang"], ["predicates", "hived"])
    queues = [make_queue("vc-a", cells={"dgx1-nvlink": 2}), make_queue("b")]
    wanted = make_job("a", queue="vc-a", gpus=4, created=1)
    decisions = run_cycle(Snapshot.build(nodes=[node], queues=queues, jobs=[wanted]), cfg, now=0.0)
    assert [b.gpus for b in decisions.binds] == [(4, 5, 6, 7)]  # not the quad holding card 2
    # the other quad is busy: its work is reclaimed, not the cordoned quad taken as free
    other = _holding(make_job("b", queue="b", gpus=4, running_on=["dgx-0"]), (4, 5, 6, 7))
    snap = Snapshot.build(nodes=[node], queues=queues, jobs=[other, wanted])
    decisions = run_cycle(snap, cfg, now=0.0)
    assert [e.job for e in decisions.evictions] == ["b"]
    assert [p.job for p in decisions.pipelined] == ["a"]


@pytest.mark.parametrize(
    "plugin", ["bestfit", "dotprod", "gpupacking", "gpuclustering", "fgd", "gpu-share"]
)
@pytest.mark.parametrize("gpus", [0.5, 1, 2])
def test_plugins_score_a_cordoned_card_as_one_the_node_lacks(plugin: str, gpus: float) -> None:
    cordoned = replace(make_node("a", gpus=4), cordoned_gpus=frozenset({1}))
    lacking = make_node("b", gpus=3)
    busy = [
        _holding(make_job("on-a", gpus=0.5, running_on=["a"]), (2,)),
        _holding(make_job("on-b", gpus=0.5, running_on=["b"]), (1,)),  # the same card, in order
    ]
    pod = make_job("pod", gpus=gpus, created=1)
    snap = Snapshot.build(nodes=[cordoned, lacking], queues=[make_queue()], jobs=[*busy, pod])
    args = dict(GPU_PLUGINS.get(plugin, {}))
    session = open_session(snap, config(["allocate"], [(plugin, args)]), now=0.0)
    task = snap.jobs["pod"].tasks[0]
    scores = session.points.node_score(task, np.arange(2, dtype=np.intp))
    assert scores[0] == scores[1]


# -- reasons ---------------------------------------------------------------------------------


def test_the_closest_node_says_its_cordoned_cards_are_in_the_way() -> None:
    nodes = [
        replace(make_node("n0", gpus=8), cordoned_gpus=frozenset({3})),
        make_node("n1", gpus=8),
    ]
    jobs = [
        make_job("on0", gpus=2, running_on=["n0"]),
        make_job("on1", gpus=4, running_on=["n1"]),
        make_job("six", gpus=6, created=1),
    ]
    snap = Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=jobs)
    decisions = run_cycle(snap, config(["allocate"], ["gang", "predicates"]), now=0.0)
    reason = decisions.reason_for("six")
    assert reason is not None
    assert "closest is n0, which lacks 1 GPU" in reason.message
    assert "(1 of its GPUs is cordoned: phalanx uncordon n0 --gpu 3)" in reason.message


def test_a_node_too_small_only_for_its_cordon_is_named_with_its_cards() -> None:
    nodes = [replace(make_node("n0", gpus=8), cordoned_gpus=frozenset({3, 6}))]
    snap = Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=[make_job("big", gpus=8)])
    decisions = run_cycle(snap, config(["allocate"], ["gang", "predicates"]), now=0.0)
    reason = decisions.reason_for("big")
    assert reason is not None
    assert reason.node == "n0"
    assert "the largest matching node has 6 GPUs" in reason.message
    assert (
        "(2 of its GPUs are cordoned: phalanx uncordon n0 --gpu 3 and phalanx uncordon n0 --gpu 6)"
        in reason.message
    )
