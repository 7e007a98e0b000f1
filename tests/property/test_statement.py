"""Undo is exact: a discarded Statement restores the session (arrays, tasks, counters, plugin
state), and a cycle run in a fork of the snapshot (``Snapshot.forked``) restores the
snapshot a driver keeps between cycles, also over several nested forks."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import event, example, given
from hypothesis import strategies as st

from phalanx.engine import run_cycle
from phalanx.engine.cycle import builtin_registry, open_session
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EVICTABLE, Snapshot, TaskStatus

from .examples import FRACTIONAL_DRIFT
from .strategies import FRACTIONAL_GPUS, Mix, worlds
from .world import World, suite_settings

ARRAYS = ("capacity", "used", "releasing", "pipelined", "task_count", "max_tasks", "schedulable")
CARD_ARRAYS = (
    "milli_free",
    "memory_free",
    "whole_free",
    "nic_users",
    "milli_releasing",
    "memory_releasing",
)


def snapshot_state(snap: Snapshot) -> dict[str, Any]:
    """The snapshot's own state, deep-copied: node arrays, tasks, job and queue aggregates."""
    state: dict[str, Any] = {name: getattr(snap, name).copy() for name in ARRAYS}
    for job in snap.jobs.values():
        state[f"job {job.name}"] = (list(job.counts), job.phase, job.allocated.copy())
        for task in job.tasks:
            state[f"task {task.name}"] = (task.status, task.node, task.start_time, task.gpus)
    for queue in snap.queues.values():
        evictable = sorted(t.name for t in queue.evictable)
        state[f"queue {queue.name}"] = (queue.allocated.copy(), queue.inqueue.copy(), evictable)
        state[f"queue {queue.name} shares"] = (queue.deserved.copy(), queue.capability.copy())
    for name in CARD_ARRAYS:
        state[f"cards {name}"] = getattr(snap.cards, name).copy()
    for user, allocated in snap.user_allocated.items():
        state[f"user {user}"] = allocated.copy()
    state["waiting"] = sorted(snap.waiting)
    state["growing"] = sorted(job.name for job in snap.growing)
    return state


def assert_indexes_kept(snap: Snapshot) -> None:
    """Each queue's ``evictable`` is exactly the bound and running tasks of its
    preemptible jobs; ``growing`` exactly the jobs with a task allocated or pipelined."""
    placing = (TaskStatus.ALLOCATED, TaskStatus.PIPELINED)
    assert snap.growing == {
        job for job in snap.jobs.values() if any(t.status in placing for t in job.tasks)
    }
    for queue in snap.queues.values():
        derived = {
            t.name
            for job in queue.jobs
            if job.spec.preemptible
            for t in job.tasks
            if t.status in EVICTABLE
        }
        assert {t.name for t in queue.evictable} == derived, queue.name


def session_state(session: Session) -> dict[str, Any]:
    """``snapshot_state`` plus what the plugins show of themselves: order keys, readiness,
    quotas, and the session's own log."""
    snap, points = session.snapshot, session.points
    state = snapshot_state(snap)
    for job in snap.jobs.values():
        state[f"job {job.name} plugins"] = (
            points.job_order.key(job),
            points.user_order.key((job.queue.name, job.user)),
            session.job_ready(job),
            session.job_pipelined(job),
        )
        for task in job.tasks:
            state[f"task {task.name} victim order"] = points.victim_order.key(task)
    for queue in snap.queues.values():
        state[f"queue {queue.name} plugins"] = points.queue_order.key(queue)
        for field in ("deserved", "guarantee", "capability"):
            state[f"queue {queue.name} {field}"] = getattr(queue, field).copy()
    state["session"] = (len(session.log), list(session.admitted), len(session.holds))
    return state


def same(a: Any, b: Any) -> bool:
    """Exact equality; arrays by np.array_equal, tuples and lists element by element."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Entries that differ, exactly."""
    found = [f"{key}: present on one side only" for key in before.keys() ^ after.keys()]
    found += [
        f"{key}: {before[key]!r} -> {after[key]!r}"
        for key in before.keys() & after.keys()
        if not same(before[key], after[key])
    ]
    return sorted(found)


def _warm_up(session: Session, world: World, count: int) -> None:
    """Run the first ``count`` configured actions, so the statement starts mid-session."""
    registry = builtin_registry()
    actions = [registry.action(a.name, a.args) for a in world.config.actions]
    for action in actions:
        action.open(session)
    for action in actions[:count]:
        action.execute(session)


def _operate(session: Session, data: st.DataObject) -> int:
    """Random allocate / pipeline / evict operations in one statement, then discard it."""
    snap = session.snapshot
    tasks = [t for job in snap.jobs.values() for t in job.tasks]
    stmt = session.statement()
    done = 0
    for _ in range(data.draw(st.integers(1, 12), label="operations")):
        kind = data.draw(st.sampled_from(["allocate", "pipeline", "evict"]), label="kind")
        wanted = EVICTABLE if kind == "evict" else {TaskStatus.PENDING}
        pool = [t for t in tasks if t.status in wanted]
        if not pool:
            continue
        task = data.draw(st.sampled_from(pool), label=kind)
        if kind == "evict":
            stmt.evict(task, action="reclaim", by="someone", reason="property test")
        else:
            node = data.draw(st.integers(0, len(snap.nodes) - 1), label="node")
            getattr(stmt, kind)(task, node)
        assert_indexes_kept(snap)
        done += 1
    stmt.discard()
    return done


def _check_discard(world: World, data: st.DataObject) -> None:
    session = open_session(world.snapshot(), world.config, now=world.now)
    _warm_up(session, world, data.draw(st.integers(0, len(world.config.actions)), label="warm"))
    before = session_state(session)
    done = _operate(session, data)
    event("operations undone: " + ("none" if not done else "1-3" if done < 4 else "4+"))
    found = differences(before, session_state(session))
    assert not found, "\n".join([*found, "--- input", world.describe()])
    assert_indexes_kept(session.snapshot)


@suite_settings(80)
@given(world=worlds(), data=st.data())
def test_discard_restores_the_snapshot_exactly(world: World, data: st.DataObject) -> None:
    _check_discard(world, data)


@suite_settings(30)
@given(world=worlds(mix=Mix(gpus=FRACTIONAL_GPUS)), data=st.data())
def test_discard_restores_the_snapshot_exactly_with_fractional_gpus(
    world: World, data: st.DataObject
) -> None:
    _check_discard(world, data)


def _check_revert(world: World) -> None:
    snapshot = world.snapshot()
    before = snapshot_state(snapshot)
    with snapshot.forked():
        run_cycle(snapshot, world.config, now=world.now)
    found = differences(before, snapshot_state(snapshot))
    assert not found, "\n".join([*found, "--- input", world.describe()])
    assert not snapshot.is_forked


@suite_settings(40)
@given(world=worlds())
def test_a_reverted_cycle_restores_the_snapshot_exactly(world: World) -> None:
    _check_revert(world)


@suite_settings(30)
@example(world=FRACTIONAL_DRIFT)
@given(world=worlds(mix=Mix(gpus=FRACTIONAL_GPUS)))
def test_a_reverted_cycle_restores_the_snapshot_exactly_with_fractional_gpus(world: World) -> None:
    _check_revert(world)


@suite_settings(30)
@given(world=worlds(), data=st.data())
def test_cycles_in_nested_forks_are_undone_by_the_outer_revert(
    world: World, data: st.DataObject
) -> None:
    """Cycles committed or reverted in inner forks, one after another (each starting from
    what the last left), are all undone by reverting the outer fork; and a cycle in a
    fork decides the same as the same cycle in a fork again."""
    snapshot = world.snapshot()
    before = snapshot_state(snapshot)
    with snapshot.forked():
        first = run_cycle(snapshot, world.config, now=world.now)
    assert run_cycle_forked(snapshot, world) == first
    snapshot.fork()
    kept = 0
    for step in range(data.draw(st.integers(1, 4), label="cycles")):
        snapshot.fork()
        run_cycle(snapshot, world.config, now=world.now + step)
        if data.draw(st.booleans(), label="commit"):
            snapshot.commit()
            kept += 1
        else:
            snapshot.revert()
    event(f"inner cycles committed: {min(kept, 2)}{'+' if kept > 2 else ''}")
    snapshot.revert()
    found = differences(before, snapshot_state(snapshot))
    assert not found, "\n".join([*found, "--- input", world.describe()])
    assert_indexes_kept(snapshot)
    assert not snapshot.is_forked


def run_cycle_forked(snapshot: Snapshot, world: World) -> object:
    """The Decisions of one cycle run in a fork of ``snapshot``."""
    with snapshot.forked():
        return run_cycle(snapshot, world.config, now=world.now)
