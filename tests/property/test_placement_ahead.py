"""Placement that looks ahead (a node's scores after further placements of a class, from
the scorers' ``ahead``) and keeps a class's scores through the session (``ClassScores``)
decides exactly as placing one task at a time, scoring every node afresh for each job and
re-scoring the chosen node after each task: same binds, on the same nodes, in the same
order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.job import Job, JobPhase, TaskPhase
from phalanx.domain.node import Node
from phalanx.engine import Decisions, SchedulerConfig, Snapshot, default_config, run_cycle
from phalanx.engine.framework.extension import ScorePoint
from phalanx.engine.state import ClusterState
from tests.builders import config, make_job, make_node, make_queue

from .strategies import Mix, worlds
from .world import World, suite_settings

#: placement's plugins as phalanx-default has them, with a seeded fgd, with fgd's integer
#: scores, and balanced alone
CONFIGS: dict[str, SchedulerConfig] = {
    "default": default_config(),
    "seeded": config(
        ["allocate"],
        ["priority", "gang"],
        ["predicates", ("fgd", {"seed": 7, "memory": True}), ("balanced", {"weight": 0.3})],
    ),
    "integer": config(["allocate"], ["gang"], ["predicates", "fgd", "balanced"]),
    "balanced": config(["allocate", "backfill"], ["gang"], ["predicates", "balanced"]),
}


@contextmanager
def one_at_a_time() -> Iterator[None]:
    """Placement as straightforward as it gets: no scorer looks ahead, and every job's
    classes are scored afresh on every node (no scores kept per class)."""
    with (
        mock.patch.object(ScorePoint, "ahead", lambda self, arg, node, count: None),
        mock.patch.object(ScorePoint, "per_class", property(lambda self: False)),
    ):
        yield


def both_ways(snapshots: Iterator[Snapshot], cfg: SchedulerConfig) -> tuple[Decisions, Decisions]:
    fast = run_cycle(next(snapshots), cfg, now=0.0)
    with one_at_a_time():
        plain = run_cycle(next(snapshots), cfg, now=0.0)
    return fast, plain


@st.composite
def busy_clusters(draw: st.DrawFn) -> tuple[list[Node], list[Job], str]:
    """Nodes of several sizes, some already running CPU or GPU tasks, and jobs of many
    identical tasks (CPU-only mostly, a few with GPUs) waiting."""
    nodes = [
        make_node(
            f"n{i:02d}",
            cpu=draw(st.sampled_from([8, 16, 32, 104])),
            memory_gib=draw(st.sampled_from([32, 64, 256])),
            gpus=draw(st.sampled_from([0, 2, 8])),
        )
        for i in range(draw(st.integers(1, 14)))
    ]
    jobs = []
    for i in range(draw(st.integers(0, 12))):  # running: one task per job on a drawn node
        node = draw(st.sampled_from(nodes))
        jobs.append(
            make_job(
                f"r{i:02d}",
                cpu=draw(st.sampled_from([1, 2, 3])),
                gpus=draw(st.sampled_from([0, 0, 1])) if node.capacity.get("gpu") else 0,
                running_on=[node.name],
                created=-1.0,
            )
        )
    for i in range(draw(st.integers(1, 8))):
        jobs.append(
            make_job(
                f"p{i:02d}",
                cpu=draw(st.sampled_from([0.5, 1, 2, 3, 6])),
                memory_gib=draw(st.sampled_from([0.5, 1, 4, 16])),
                gpus=draw(st.sampled_from([0, 0, 0, 0, 1, 0.5])),
                replicas=draw(st.integers(1, 40)),
                min_available=1,
                created=float(i),
            )
        )
    return nodes, jobs, draw(st.sampled_from(sorted(CONFIGS)))


@suite_settings(150)
@given(case=busy_clusters())
def test_looking_ahead_places_as_one_task_at_a_time(
    case: tuple[list[Node], list[Job], str],
) -> None:
    nodes, jobs, name = case
    queues = [make_queue("default")]
    snapshots = (Snapshot.build(nodes=nodes, queues=queues, jobs=jobs) for _ in range(2))
    fast, plain = both_ways(snapshots, CONFIGS[name])
    assert fast == plain


@suite_settings(40)
@given(world=worlds(mix=Mix(gpus=(0, 0, 0, 1, 2), max_replicas=6)))
def test_looking_ahead_decides_as_one_task_at_a_time_in_any_world(world: World) -> None:
    snapshots = (world.snapshot() for _ in range(2))
    fast = run_cycle(next(snapshots), world.config, now=world.now)
    with one_at_a_time():
        plain = run_cycle(next(snapshots), world.config, now=world.now)
    assert fast == plain


def _drive(state: ClusterState, cfg: SchedulerConfig, waves: list[list[Job]]) -> list[Decisions]:
    """Cycles of a driver: each wave of jobs arrives, a session runs, its binds start and
    the oldest running job finishes."""
    decided = []
    for t, wave in enumerate(waves):
        for job in wave:
            state.add_job(job)
        decisions = state.cycle(cfg, now=float(t))
        decided.append(decisions)
        for bind in decisions.binds:
            task = state.job(bind.job).tasks[bind.index]
            state.set_task(task, TaskPhase.BOUND, bind.node, now=float(t), gpus=bind.gpus)
            state.set_phase(bind.job, JobPhase.RUNNING)
        running = sorted(n for n, j in state.snapshot.jobs.items() if j.phase is JobPhase.RUNNING)
        if running:
            state.remove_job(running[0])
    return decided


@suite_settings(60)
@given(case=busy_clusters(), more=st.lists(busy_clusters(), min_size=1, max_size=3))
def test_scores_kept_from_cycle_to_cycle_decide_as_scoring_afresh(
    case: tuple[list[Node], list[Job], str],
    more: list[tuple[list[Node], list[Job], str]],
) -> None:
    nodes, jobs, name = case
    waves = [jobs] + [  # later waves: the pending jobs of other draws
        [
            replace(j, name=f"w{w}-{j.name}", creation_time=10.0 * (w + 1))
            for j in extra
            if not j.tasks
        ]
        for w, (_, extra, _) in enumerate(more)
    ]
    cfg = CONFIGS[name]
    fast = _drive(ClusterState(nodes, [make_queue("default")]), cfg, waves)
    with one_at_a_time():
        plain = _drive(ClusterState(nodes, [make_queue("default")]), cfg, waves)
    assert fast == plain
