"""Cordoned cards (``Node.cordoned_gpus``) under random clusters: no cycle gives a new task
one, no node takes GPU work past its allocatable GPUs (its cordoned cards out, the tasks
on them still counted), every running task keeps the cards it holds, cordoned or not,
and discarded statements and reverted cycles restore the snapshot exactly."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import event, given
from hypothesis import strategies as st

from phalanx.domain.job import Job
from phalanx.domain.node import Node
from phalanx.engine import Decisions
from phalanx.engine.snapshot import ON_NODE

from .checks import node_violations, report, run
from .ledger import TOLERANCE, Ledger
from .strategies import FRACTIONAL_GPUS, Mix, worlds
from .test_statement import _check_discard, _check_revert
from .world import World, suite_settings


@st.composite
def _cordoned(draw: st.DrawFn, node: Node) -> Node:
    """``node`` with up to three of its cards cordoned (none, a third of the time)."""
    count = int(node.capacity.get("gpu"))
    if not count or not draw(st.sampled_from([False, True, True])):
        return node
    cards = draw(st.sets(st.integers(0, count - 1), min_size=1, max_size=min(3, count)))
    return replace(node, cordoned_gpus=frozenset(cards))


def _recorded(world: World) -> tuple[Job, ...]:
    """``world``'s jobs with each task on a node naming the cards it holds in a snapshot
    of the world as drawn: what a driver records as its tasks start."""
    snapshot = world.snapshot()
    jobs = []
    for job in world.jobs:
        info = snapshot.jobs.get(job.name)
        held = {} if info is None else {(t.role.name, t.index): t.gpus for t in info.tasks}
        tasks = tuple(replace(t, gpus=held.get((t.role, t.index), ())) for t in job.tasks)
        jobs.append(replace(job, tasks=tasks))
    return tuple(jobs)


@st.composite
def cordoned_worlds(draw: st.DrawFn, mix: Mix | None = None) -> World:
    """A drawn world whose running tasks name their cards, then some cards cordoned under
    them (a card breaks where it may hold work or not)."""
    world = draw(worlds() if mix is None else worlds(mix=mix))
    world = replace(world, jobs=_recorded(world))
    nodes = tuple(draw(_cordoned(node)) for node in world.nodes)
    if any(node.cordoned_gpus for node in nodes):
        event("cards cordoned")
    return replace(world, nodes=nodes)


def _describe(world: World) -> str:
    cordoned = [f"{n.name}: {sorted(n.cordoned_gpus)}" for n in world.nodes if n.cordoned_gpus]
    return "cordoned cards: " + ("; ".join(cordoned) or "none")


def cordon_violations(world: World, decisions: Decisions) -> list[str]:
    """Binds that name a cordoned card, and nodes given GPU work past their allocatable
    GPUs (capacity less cordoned cards) with what they hold."""
    nodes = {n.name: n for n in world.nodes}
    found = []
    for bind in decisions.binds:
        cordoned = nodes[bind.node].cordoned_gpus & set(bind.gpus)
        if cordoned:
            found.append(f"{bind.task} got cordoned card(s) {sorted(cordoned)} of {bind.node}")
    ledger = Ledger(world, decisions)
    given_gpus = {
        b.node for b in decisions.binds if ledger.tasks[b.task].request.get("gpu", 0.0) > 0
    }
    loads = ledger.node_loads()
    for name in sorted(given_gpus):
        node = nodes[name]
        allocatable = node.capacity.get("gpu") - len(node.cordoned_gpus)
        held = loads[name].now.get("gpu", 0.0)
        if held > allocatable + TOLERANCE:
            found.append(f"{name}: {held:g} GPUs held with binds, {allocatable:g} allocatable")
    return found


@suite_settings(80)
@given(world=cordoned_worlds())
def test_no_new_task_gets_a_cordoned_card_and_no_node_is_over_committed(world: World) -> None:
    decisions = run(world)
    found = node_violations(world, decisions) + cordon_violations(world, decisions)
    assert not found, report(world, decisions, [*found, _describe(world)])


@suite_settings(40)
@given(world=cordoned_worlds(Mix(gpus=FRACTIONAL_GPUS)))
def test_shares_never_land_on_a_cordoned_card(world: World) -> None:
    decisions = run(world)
    found = node_violations(world, decisions) + cordon_violations(world, decisions)
    assert not found, report(world, decisions, [*found, _describe(world)])


@suite_settings(60)
@given(world=cordoned_worlds())
def test_running_tasks_keep_the_cards_they_hold_cordoned_or_not(world: World) -> None:
    snapshot = world.snapshot()
    for job in world.jobs:
        info = snapshot.jobs.get(job.name)
        if info is None:
            continue
        recorded = {(t.role, t.index): t.gpus for t in job.tasks}
        for task in info.tasks:
            named = recorded.get((task.role.name, task.index), ())
            if task.status in ON_NODE and named:
                assert task.gpus == named, (task.name, _describe(world))


@suite_settings(50)
@given(world=cordoned_worlds(), data=st.data())
def test_discard_restores_the_snapshot_exactly_with_cordoned_cards(
    world: World, data: st.DataObject
) -> None:
    _check_discard(world, data)


@suite_settings(30)
@given(world=cordoned_worlds())
def test_a_reverted_cycle_restores_the_snapshot_exactly_with_cordoned_cards(world: World) -> None:
    _check_revert(world)
