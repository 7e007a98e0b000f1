"""Same snapshot + config + now -> same Decisions, whatever order jobs and queues arrive in,
and whichever driver keeps the snapshot (built afresh, or a ClusterState updated in place)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from phalanx.domain.job import Job
from phalanx.domain.queue import Queue
from phalanx.engine import run_cycle
from phalanx.engine.state import ClusterState

from .checks import run
from .examples import FRACTIONAL_DRIFT
from .strategies import FRACTIONAL_GPUS, Mix, worlds
from .world import World, suite_settings


@st.composite
def _shuffled(draw: st.DrawFn) -> tuple[World, tuple[Job, ...], tuple[Queue, ...]]:
    world = draw(worlds())
    return (
        world,
        tuple(draw(st.permutations(world.jobs))),
        tuple(draw(st.permutations(world.queues))),
    )


@suite_settings(40)
@given(case=_shuffled())
def test_same_input_gives_the_same_decisions_in_any_input_order(
    case: tuple[World, tuple[Job, ...], tuple[Queue, ...]],
) -> None:
    world, jobs, queues = case
    first = run(world)
    assert run(world) == first, "two runs over fresh snapshots of one input differ"
    shuffled = run_cycle(world.snapshot(jobs=jobs, queues=queues), world.config, now=world.now)
    assert shuffled == first, (
        f"jobs in order {[j.name for j in jobs]} and queues {[q.name for q in queues]} "
        "give other decisions"
    )
    state = ClusterState(world.nodes, queues)
    for job in jobs:
        state.add_job(job)
    assert state.cycle(world.config, now=world.now) == first, "ClusterState decides otherwise"
    assert state.cycle(world.config, now=world.now) == first, "a reverted cycle changed the state"


@suite_settings(30)
@example(world=FRACTIONAL_DRIFT)
@given(world=worlds(mix=Mix(gpus=FRACTIONAL_GPUS)))
def test_a_cluster_state_decides_the_same_every_cycle_with_fractional_gpus(world: World) -> None:
    state = ClusterState(world.nodes, world.queues)
    for job in world.jobs:
        state.add_job(job)
    first = state.cycle(world.config, now=world.now)
    assert state.cycle(world.config, now=world.now) == first
