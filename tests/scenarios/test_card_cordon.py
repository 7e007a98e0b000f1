"""A card cordoned by itself (``Node.cordoned_gpus``), as the control plane sets it when a
GPU reports hardware errors, over several cycles of the one lifecycle (``World``) and
through the simulator: the node loses that card and no more, the work on it stays where
it is, and the card takes work again once uncordoned (the engine state rebuilt)."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from phalanx.domain.node import Node
from phalanx.engine.snapshot import TaskStatus
from phalanx.engine.state import ClusterState
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob
from tests.builders import config, make_job, make_node, make_queue
from tests.scenarios.world import World

CFG = config(
    ["enqueue", "allocate", "backfill"], ["priority", "gang"], ["drf", "predicates", "binpack"]
)
QUEUES = [make_queue()]


def _node(*cordoned: int) -> Node:
    """An 8-GPU node with ``cordoned`` cards out of scheduling."""
    return replace(make_node("n0", gpus=8), cordoned_gpus=frozenset(cordoned))


def _rebuild(world: World, node: Node) -> None:
    """What the control plane does when a node's cordoned cards change: a new engine
    state, every tracked job carried into it as it is now."""
    world._carry_out(world.life.rebuild(ClusterState([node], QUEUES)))


def _cards_of(world: World, job: str) -> list[tuple[int, ...]]:
    """The cards each of ``job``'s tasks on a node holds in the engine's state now."""
    life = world.life.jobs[job]
    return [t.gpus for t in world.life.tasks(life) if t.status is TaskStatus.RUNNING]


def test_an_8_gpu_job_waits_for_a_cordoned_card_while_a_7_gpu_job_takes_the_rest() -> None:
    world = World(nodes=[_node(3)], queues=QUEUES, config=CFG)
    world.submit(make_job("big", gpus=8, created=0), make_job("small", gpus=7, created=1))
    decisions = world.step(1.0)
    assert [(b.job, b.gpus) for b in decisions.binds] == [("small", (0, 1, 2, 4, 5, 6, 7))]
    reason = decisions.reason_for("big")
    assert reason is not None
    assert "the largest matching node has 7 GPUs" in reason.message
    assert "1 of its GPUs is cordoned: phalanx uncordon n0 --gpu 3" in reason.message
    world.run([2.0, 3.0])
    assert world.placed("big") == []
    assert world.placed("small") == ["n0"]


def test_a_task_on_a_card_cordoned_under_it_keeps_that_card_across_rebuilds() -> None:
    world = World(nodes=[_node()], queues=QUEUES, config=CFG)
    world.submit(make_job("four", gpus=4, created=0))
    world.step(1.0)
    assert _cards_of(world, "four") == [(0, 1, 2, 3)]
    _rebuild(world, _node(1, 3))  # two of its cards break under it
    assert _cards_of(world, "four") == [(0, 1, 2, 3)]
    world.submit(make_job("two", gpus=2, created=2), make_job("more", gpus=1, created=3))
    decisions = world.step(4.0)
    assert not decisions.evictions
    # 6 GPUs are allocatable and 4 are held (Kubernetes counts them): 2 are left, on 4 and 5
    assert [(b.job, b.gpus) for b in decisions.binds] == [("two", (4, 5))]
    reason = decisions.reason_for("more")
    assert reason is not None
    assert (
        "2 of its GPUs are cordoned: phalanx uncordon n0 --gpu 1 and phalanx uncordon n0 --gpu 3"
        in reason.message
    )
    _rebuild(world, _node(1, 3))  # another rebuild: nothing moves
    assert _cards_of(world, "four") == [(0, 1, 2, 3)]
    assert _cards_of(world, "two") == [(4, 5)]
    assert world.placed("four") == ["n0"]


def test_uncordoning_the_card_lets_the_8_gpu_job_in() -> None:
    world = World(nodes=[_node(3)], queues=QUEUES, config=CFG)
    world.submit(make_job("big", gpus=8, created=0))
    assert not world.step(1.0).binds
    _rebuild(world, _node())
    decisions = world.step(2.0)
    assert [(b.job, b.gpus) for b in decisions.binds] == [("big", tuple(range(8)))]


def test_through_the_simulator_only_the_7_gpu_job_runs_on_a_node_with_a_cordoned_card() -> None:
    jobs = (
        WorkloadJob(job=make_job("small", gpus=7, created=0), duration=100.0),
        WorkloadJob(job=make_job("big", gpus=8, created=1), duration=100.0),
    )
    out = io.StringIO()
    options = SimOptions(period=1.0, max_period=60.0, trigger_delay=0.0, until=1000.0)
    simulation = Simulation(
        [_node(3)], Workload(jobs=jobs), CFG, queues=QUEUES, options=options, events_out=out
    )
    simulation.run()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    placed = [(r["job"], t["gpus"]) for r in rows if r["ev"] == "Placed" for t in r["tasks"]]
    assert placed == [("small", [0, 1, 2, 4, 5, 6, 7])]
    finished = {r["job"] for r in rows if r["ev"] == "Succeeded"}
    assert finished == {"small"}
