"""Invariants of one scheduling cycle over random clusters, queue trees and gang jobs.

Each property runs every config variant (default; proportion instead of capacity;
spread instead of binpack; and, where the property does not rest on gangs, no gang
plugin at all). The checks recompute node and queue loads from the input and the
Decisions alone. Inputs that once broke a property are replayed as explicit examples.
"""

from __future__ import annotations

from random import Random

from hypothesis import Phase, example, find, given

from .checks import (
    capability_violations,
    guarantee_violations,
    node_violations,
    partial_bind_violations,
    partial_remnant_violations,
    reason_violations,
    report,
    run,
    task_limit_violations,
)
from .examples import (
    GANG_REMNANT,
    PIPELINED_ONTO_A_FULL_NODE,
    PIPELINED_PAST_MAX_TASKS,
    QUOTA_GANG_REMNANT,
)
from .strategies import CONTENTION, Mix, worlds
from .world import GANG_CONFIGS, World, suite_settings


@suite_settings(100)
@given(world=worlds())
def test_no_node_is_over_committed(world: World) -> None:
    decisions = run(world)
    found = node_violations(world, decisions)
    assert not found, report(world, decisions, found)


@suite_settings(40)
@example(world=PIPELINED_PAST_MAX_TASKS)
@example(world=PIPELINED_ONTO_A_FULL_NODE)
@given(world=worlds(mix=Mix(max_tasks=(1, 2, 3), releasing=(True, False))))
def test_pipelined_tasks_respect_max_tasks(world: World) -> None:
    decisions = run(world)
    found = task_limit_violations(world, decisions)
    assert not found, report(world, decisions, found)


@suite_settings(100)
@given(world=worlds(configs=GANG_CONFIGS))
def test_no_partial_gang_is_bound(world: World) -> None:
    decisions = run(world)
    found = partial_bind_violations(world, decisions)
    assert not found, report(world, decisions, found)


@suite_settings(150)
@example(world=GANG_REMNANT)
@example(world=QUOTA_GANG_REMNANT)
@given(world=worlds(configs=GANG_CONFIGS))
def test_evictions_leave_no_partial_gang(world: World) -> None:
    decisions = run(world)
    found = partial_remnant_violations(world, decisions)
    assert not found, report(world, decisions, found)


def test_the_gang_check_catches_partial_gangs_without_the_gang_plugin() -> None:
    """Negative control: without the gang plugin, partial gangs are bound and the check sees it."""

    def partial_binds(world: World) -> bool:
        return bool(partial_bind_violations(world, run(world)))

    found = find(
        worlds(configs=("no-gang",)),
        partial_binds,
        settings=suite_settings(300, phases=(Phase.generate,)),
        random=Random(0),
    )
    assert partial_binds(found)


@suite_settings(100)
@given(world=worlds())
def test_capability_is_never_exceeded(world: World) -> None:
    decisions = run(world)
    found = capability_violations(world, decisions)
    assert not found, report(world, decisions, found)


@suite_settings(30)
@given(world=worlds(mix=Mix(zero_gpu_caps=True, capability=(True, True, False))))
def test_a_capability_of_zero_gpus_admits_no_gpu_work(world: World) -> None:
    decisions = run(world)
    found = capability_violations(world, decisions)
    assert not found, report(world, decisions, found)


@suite_settings(120)
@given(world=worlds(mix=CONTENTION, max_nodes=4))
def test_reclaim_never_pushes_a_queue_below_its_guarantee(world: World) -> None:
    decisions = run(world)
    found = guarantee_violations(world, decisions)
    assert not found, report(world, decisions, found)


@suite_settings(100)
@given(world=worlds())
def test_every_job_left_pending_has_a_reason(world: World) -> None:
    decisions = run(world)
    found = reason_violations(world, decisions)
    assert not found, report(world, decisions, found)
