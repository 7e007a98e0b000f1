"""datalocality: tasks go to nodes whose cache holds their datasets; ``required`` waits
for one, saying which datasets and how to warm them; gangs pack onto the nodes they fill;
jobs without datasets are placed exactly as without the plugin."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import PluginError
from phalanx.domain.job import DataLocality, Job
from phalanx.domain.node import Node
from phalanx.engine import Decisions, SchedulerConfig, Snapshot, default_config, run_cycle
from phalanx.engine.cycle import builtin_registry, open_session
from phalanx.engine.decisions import ReasonCode
from phalanx.engine.framework.extension import ScorePoint
from phalanx.engine.plugins.datalocality import DEFAULT_WEIGHT
from phalanx.engine.snapshot import TaskStatus
from phalanx.engine.state import ClusterState
from phalanx.policies import load_policy
from tests.builders import bound, config, cycle, make_job, make_node, make_nodes, make_queue

LOCALITY = config(["allocate"], ["gang", "predicates"], ["binpack", "datalocality"])
SPREAD = config(["allocate"], ["gang", "predicates"], ["spread", "datalocality"])
WITH_ENQUEUE = config(
    ["enqueue", "allocate", "preempt", "backfill"],
    ["priority", "gang", "predicates", "capacity"],
    ["binpack", "datalocality"],
)


def digest(name: str) -> str:
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()


def holding(node: Node, *names: str) -> Node:
    """``node`` with the named datasets in its cache."""
    return replace(node, datasets=frozenset(digest(n) for n in names))


def reading(job: Job, *names: str, required: bool = False, pinned: bool = True) -> Job:
    """``job`` whose every role reads the named datasets (pinned to their digests)."""
    locality = DataLocality.REQUIRED if required else DataLocality.PREFERRED
    datasets = tuple((n, digest(n) if pinned else None) for n in names)
    roles = tuple(replace(r, datasets=datasets, data_locality=locality) for r in job.roles)
    return replace(job, roles=roles)


def without_locality(cfg: SchedulerConfig) -> SchedulerConfig:
    tiers = tuple(tuple(p for p in tier if p.name != "datalocality") for tier in cfg.tiers)
    return replace(cfg, tiers=tiers)


# -- preferred ---------------------------------------------------------------------------


def test_a_warm_node_wins_over_the_node_packing_prefers() -> None:
    nodes = [*make_nodes(2), holding(make_node("n2"), "imagenet")]
    filler = make_job("filler", gpus=4, running_on=["n0"])  # binpack alone picks n0
    job = reading(make_job("train", gpus=1, created=1), "imagenet")
    assert bound(cycle(nodes, [filler, job], without_locality(LOCALITY)), "train") == ["n0"]
    assert bound(cycle(nodes, [filler, job], LOCALITY), "train") == ["n2"]


def test_under_the_default_policy_a_warm_node_wins_over_fgd_and_balanced() -> None:
    nodes = [*make_nodes(3), holding(make_node("n3"), "imagenet")]
    fillers = [make_job(f"f{i}", gpus=7, running_on=[f"n{i}"]) for i in range(3)]
    job = reading(make_job("train", gpus=1, created=1), "imagenet")  # fgd: a 1-GPU hole
    plain = bound(cycle(nodes, [*fillers, job], without_locality(default_config())), "train")
    assert plain != ["n3"]
    assert bound(cycle(nodes, [*fillers, job], default_config()), "train") == ["n3"]


def test_a_node_holding_more_of_the_datasets_scores_more() -> None:
    nodes = [
        make_node("n0"),
        holding(make_node("n1"), "imagenet"),
        holding(make_node("n2"), "imagenet", "coco"),
        holding(make_node("n3"), "coco", "other"),
    ]
    job = reading(make_job("train", gpus=1), "imagenet", "coco")
    snapshot = Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=[job])
    session = open_session(snapshot, config(["allocate"], [], ["datalocality"]), now=0.0)
    task = snapshot.jobs["train"].tasks[0]
    scores = session.points.node_score(task, np.arange(4))
    half, whole = 50.0 * DEFAULT_WEIGHT, 100.0 * DEFAULT_WEIGHT
    assert scores.tolist() == [0.0, half, whole, half]


def test_the_fraction_held_orders_the_nodes_a_task_goes_to() -> None:
    nodes = [
        make_node("n0"),
        holding(make_node("n1"), "imagenet"),
        holding(make_node("n2"), "imagenet", "coco"),
    ]
    filler = make_job("filler", gpus=4, running_on=["n0"])  # binpack alone picks n0
    job = reading(make_job("train", gpus=1, created=1), "imagenet", "coco")
    assert bound(cycle(nodes, [filler, job], LOCALITY), "train") == ["n2"]  # both
    nodes[2] = replace(nodes[2], schedulable=False)
    assert bound(cycle(nodes, [filler, job], LOCALITY), "train") == ["n1"]  # one of two


def test_an_unpinned_dataset_is_cold_everywhere() -> None:
    nodes = [*make_nodes(2), holding(make_node("n2"), "imagenet")]
    filler = make_job("filler", gpus=4, running_on=["n0"])
    job = reading(make_job("train", gpus=1, created=1), "imagenet", pinned=False)
    assert bound(cycle(nodes, [filler, job], LOCALITY), "train") == ["n0"]


def test_the_weight_is_an_arg_and_is_checked() -> None:
    registry = builtin_registry()
    assert registry.plugin("datalocality", {}).weight == DEFAULT_WEIGHT
    assert registry.plugin("datalocality", {"weight": 2}).weight == 2.0
    with pytest.raises(PluginError, match="weight"):
        registry.plugin("datalocality", {"weight": "high"})
    with pytest.raises(PluginError, match="accepts: weight"):
        registry.plugin("datalocality", {"wieght": 2})


# -- gangs ---------------------------------------------------------------------------------


def test_a_gang_packs_onto_the_warm_node_that_holds_it_all() -> None:
    nodes = [*make_nodes(2), holding(make_node("n2"), "imagenet")]
    gang = reading(make_job("train", gpus=4, replicas=2), "imagenet")
    assert sorted(bound(cycle(nodes, [gang], without_locality(SPREAD)), "train")) == ["n0", "n1"]
    assert bound(cycle(nodes, [gang], SPREAD), "train") == ["n2", "n2"]


def test_a_gang_shares_the_cold_node_its_first_task_fills() -> None:
    nodes = make_nodes(3)
    gang = reading(make_job("train", gpus=4, replicas=2), "imagenet")
    assert len(set(bound(cycle(nodes, [gang], without_locality(SPREAD)), "train"))) == 2
    assert len(set(bound(cycle(nodes, [gang], SPREAD), "train"))) == 1  # one fill, not two


def test_a_task_joins_the_node_where_its_job_already_runs() -> None:
    nodes = make_nodes(3)
    gang = reading(make_job("train", gpus=4, replicas=2, running_on=["n1"]), "imagenet")
    assert bound(cycle(nodes, [gang], SPREAD), "train") == ["n1"]


def test_the_credit_is_the_jobs_own() -> None:
    nodes = make_nodes(3)
    other = reading(make_job("other", gpus=4, running_on=["n1"]), "imagenet")
    job = reading(make_job("train", gpus=4, created=1), "imagenet")
    assert bound(cycle(nodes, [other, job], SPREAD), "train") != ["n1"]


def test_a_releasing_task_gives_no_credit() -> None:
    snapshot = Snapshot.build(
        nodes=make_nodes(2),
        queues=[make_queue()],
        jobs=[reading(make_job("train", gpus=1, replicas=2, running_on=["n1"]), "imagenet")],
    )
    info = snapshot.jobs["train"]
    snapshot.move(info.tasks[0], TaskStatus.RELEASING)
    session = open_session(snapshot, SPREAD, now=0.0)
    scores = session.points.node_score(info.tasks[1], np.arange(2))
    assert scores[1] <= scores[0]  # no locality credit on n1: spread alone decides


def test_looking_ahead_places_a_gang_as_one_task_at_a_time_does() -> None:
    nodes = [make_node(f"n{i}", cpu=8, gpus=0) for i in range(3)]
    nodes[2] = holding(nodes[2], "coco")
    gang = reading(make_job("train", gpus=0, cpu=1, replicas=12), "imagenet", "coco")
    cfg = config(["allocate"], ["gang", "predicates"], ["balanced", "datalocality"])
    fast, plain = _both_ways(nodes, [gang], cfg)
    assert fast == plain
    assert bound(fast, "train") == ["n2"] * 8 + ["n0"] * 4


# -- required ------------------------------------------------------------------------------


def test_required_waits_for_a_warm_node_naming_the_dataset_and_the_fix() -> None:
    nodes = make_nodes(3)
    job = reading(make_job("train", gpus=1), "imagenet", required=True)
    decisions = cycle(nodes, [job], WITH_ENQUEUE)
    assert decisions.binds == ()
    reason = decisions.reason_for("train")
    assert reason is not None and reason.code is ReasonCode.NO_MATCHING_NODE
    assert reason.message == (
        "task worker (1 GPU, 1 CPU and 1Gi memory) waits for a node whose cache holds "
        "dataset imagenet (dataLocality: required): 0/3 nodes hold it; fix: phalanx dataset "
        "warm imagenet --nodes NODE, or set dataLocality: preferred on role worker"
    )
    warm = [*nodes[:2], holding(nodes[2], "imagenet")]
    assert bound(cycle(warm, [job], WITH_ENQUEUE), "train") == ["n2"]


def test_required_names_each_dataset_and_the_node_to_warm() -> None:
    nodes = [*make_nodes(2), holding(make_node("n2"), "imagenet")]
    job = reading(make_job("train", gpus=1), "imagenet", "coco", required=True)
    reason = cycle(nodes, [job], LOCALITY).reason_for("train")
    assert reason is not None and reason.node == "n2"
    assert reason.message.endswith(
        "holds datasets imagenet and coco (dataLocality: required): 0/3 nodes hold all of "
        "them (imagenet on 1 node, coco on none); fix: phalanx dataset warm coco --nodes n2, "
        "or set dataLocality: preferred on role worker"
    )


def test_required_says_when_the_warm_node_is_unschedulable() -> None:
    nodes = [*make_nodes(2), replace(holding(make_node("n2"), "imagenet"), schedulable=False)]
    job = reading(make_job("train", gpus=1), "imagenet", required=True)
    reason = cycle(nodes, [job], LOCALITY).reason_for("train")
    assert reason is not None
    assert "0/3 schedulable nodes hold it; n2 does, but is unschedulable" in reason.message
    assert "fix: uncordon n2, or phalanx dataset warm imagenet --nodes NODE, or" in reason.message


def test_required_never_goes_to_a_cold_node_even_when_the_warm_one_is_full() -> None:
    nodes = [*make_nodes(2), holding(make_node("n2"), "imagenet")]
    full = make_job("full", gpus=8, running_on=["n2"])
    job = reading(make_job("train", gpus=1, created=1), "imagenet", required=True)
    decisions = cycle(nodes, [full, job], LOCALITY)
    assert bound(decisions, "train") == []
    reason = decisions.reason_for("train")
    assert reason is not None and reason.code is ReasonCode.INSUFFICIENT
    assert "2 more excluded by predicates" in reason.message


def test_an_unpinned_required_dataset_waits_saying_so() -> None:
    nodes = [holding(make_node("n0"), "imagenet")]
    job = reading(make_job("train", gpus=1), "imagenet", "coco", required=True, pinned=False)
    reason = cycle(nodes, [job], LOCALITY).reason_for("train")
    assert reason is not None
    assert "(imagenet not pinned to a listing yet, coco not pinned" in reason.message


def test_a_cold_required_job_evicts_nothing() -> None:
    nodes = make_nodes(1)
    low = make_job("low", gpus=8, running_on=["n0"])
    high = reading(make_job("high", gpus=8, priority=10, created=1), "imagenet", required=True)
    decisions = cycle(nodes, [low, high], WITH_ENQUEUE)
    assert decisions.evictions == ()
    reason = decisions.reason_for("high")
    assert reason is not None and "waits for a node whose cache holds" in reason.message


def test_a_job_without_datasets_is_not_held_back_by_a_cold_one_of_its_shape() -> None:
    nodes = make_nodes(2)
    cold = reading(make_job("cold", gpus=8), "imagenet", required=True)
    plain = make_job("plain", gpus=8, created=1)
    decisions = cycle(nodes, [cold, plain], WITH_ENQUEUE)
    assert bound(decisions, "plain") == ["n0"]


def test_a_job_without_datasets_still_preempts_behind_a_cold_one_of_its_shape() -> None:
    low = make_job("low", gpus=8, running_on=["n0"])
    cold = reading(make_job("cold", gpus=8, priority=10, created=1), "imagenet", required=True)
    plain = make_job("plain", gpus=8, priority=10, created=2)
    decisions = cycle(make_nodes(1), [low, cold, plain], WITH_ENQUEUE)
    assert [e.by for e in decisions.evictions] == ["plain"]


def test_a_kept_state_sees_a_cache_fill_between_cycles() -> None:
    state = ClusterState(make_nodes(3), [make_queue()])
    state.add_job(reading(make_job("train", gpus=1), "imagenet", required=True))
    assert state.cycle(WITH_ENQUEUE, now=0.0).binds == ()
    state.snapshot.set_datasets(1, frozenset({digest("imagenet")}))
    assert bound(state.cycle(WITH_ENQUEUE, now=1.0), "train") == ["n1"]
    state.add_job(reading(make_job("eval", gpus=1, created=2), "coco", required=True))
    state.snapshot.set_datasets(2, frozenset({digest("coco")}))
    assert bound(state.cycle(WITH_ENQUEUE, now=2.0), "eval") == ["n2"]


# -- jobs without datasets -----------------------------------------------------------------


def test_the_default_policy_carries_the_plugin() -> None:
    policy = load_policy("phalanx-default").config
    assert "datalocality" in [p.name for tier in policy.tiers for p in tier]


def test_a_session_without_readers_registers_nothing() -> None:
    snapshot = Snapshot.build(nodes=make_nodes(2), queues=[make_queue()], jobs=[make_job()])
    session = open_session(snapshot, default_config(), now=0.0)
    points = session.points
    for point in (points.node_score, points.predicate, points.confinement, points.on_allocate):
        assert "datalocality" not in point.plugins


def test_a_task_without_datasets_scores_as_without_the_plugin_beside_a_reader() -> None:
    nodes = [holding(make_node(f"n{i}", gpus=i), "imagenet") for i in range(1, 4)]
    jobs = [
        reading(make_job("reader", gpus=1), "imagenet", required=True),
        make_job("plain", gpus=1, created=1),
        make_job("busy", gpus=1, running_on=["n2"]),
    ]
    snapshot = Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=jobs)
    task = snapshot.jobs["plain"].tasks[0]
    every = np.arange(len(nodes))
    cfg = default_config()
    scored = open_session(snapshot, cfg, now=0.0).points.node_score
    assert "datalocality" in scored.plugins
    plain = open_session(snapshot, without_locality(cfg), now=0.0).points.node_score
    assert scored(task, every).tolist() == plain(task, every).tolist()


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Job]]:
    """Nodes of a few sizes, some caching datasets, some busy; jobs without datasets of
    one to three tasks, some running, some waiting, of two priorities."""
    names = ["imagenet", "coco", "wiki"]
    nodes = [
        holding(
            make_node(
                f"n{i}", cpu=draw(st.sampled_from([8, 16])), gpus=draw(st.sampled_from([2, 8]))
            ),
            *draw(st.lists(st.sampled_from(names), max_size=2, unique=True)),
        )
        for i in range(draw(st.integers(1, 6)))
    ]
    jobs = []
    for i in range(draw(st.integers(1, 8))):
        running = draw(st.booleans())
        jobs.append(
            make_job(
                f"j{i}",
                gpus=draw(st.sampled_from([0, 1, 2])),
                cpu=draw(st.sampled_from([1, 2, 4])),
                replicas=draw(st.integers(1, 3)),
                priority=draw(st.sampled_from([0, 10])),
                created=float(i),
                running_on=[draw(st.sampled_from(nodes)).name] if running else [],
            )
        )
    return nodes, jobs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from(["phalanx-default", "spread"]))
def test_jobs_without_datasets_get_the_same_decisions_with_and_without_the_plugin(
    cluster: tuple[list[Node], list[Job]], policy: str
) -> None:
    nodes, jobs = cluster
    cfg = default_config() if policy == "phalanx-default" else SPREAD
    with_it = cycle(nodes, jobs, cfg)
    assert with_it == cycle(nodes, jobs, without_locality(cfg))


# -- helpers -------------------------------------------------------------------------------


def _both_ways(
    nodes: Sequence[Node], jobs: Iterable[Job], cfg: SchedulerConfig
) -> tuple[Decisions, Decisions]:
    """The cycle as placement runs it (looking ahead), and one task at a time, every
    node scored afresh (as ``tests/property/test_placement_ahead.py`` compares them)."""
    jobs = list(jobs)

    def run() -> Decisions:
        return run_cycle(
            Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=jobs), cfg, now=0.0
        )

    fast = run()
    with (
        mock.patch.object(ScorePoint, "ahead", lambda self, arg, node, count: None),
        mock.patch.object(ScorePoint, "per_class", property(lambda self: False)),
    ):
        plain = run()
    return fast, plain
