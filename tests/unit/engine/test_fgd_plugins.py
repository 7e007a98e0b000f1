"""The FGD paper's placement plugins on tiny clusters, against hand-computed scores.

Each node has 32 cores and 4 GPUs unless said otherwise; "cards" lists each card's free
milli-GPU. Scores are the plugins' own (0..100), read through the session's node_score
point; without ``seed`` no tie-break noise is added, so they are exact integers.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pytest

from phalanx.domain.errors import PluginError
from phalanx.domain.job import (
    Job,
    JobPhase,
    NodeSelectorRequirement,
    Role,
    SelectorOperator,
    Task,
    TaskPhase,
)
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine import Snapshot, run_cycle
from phalanx.engine.cycle import open_session
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.fgd import FgdPlugin
from phalanx.engine.plugins.fgd.learn import RecentJobs, gpu_models, learn
from phalanx.engine.plugins.fgd.workload import TaskShape, workload_distribution
from phalanx.engine.snapshot import TaskInfo, TaskStatus
from phalanx.engine.state import ClusterState
from tests.builders import config, make_job, make_node, make_queue, res

NODES = ("a", "b", "c")
#: a learnt target as comparable values: its shapes and their popularity
Learnt = tuple[tuple[TaskShape, ...], list[float]]


def running(
    name: str, node: str, gpus: float, cards: tuple[int, ...], cpu: float = 1, memory_gib: float = 1
) -> Job:
    """A running one-task job on ``node`` holding ``cards``."""
    job = make_job(name, gpus=gpus, cpu=cpu, memory_gib=memory_gib, running_on=[node])
    return replace(job, tasks=tuple(replace(t, gpus=cards) for t in job.tasks))


def session_for(
    plugin: str,
    pod: Job,
    others: Sequence[Job] = (),
    *,
    args: Mapping[str, object] | None = None,
    nodes: Sequence[str] = NODES,
    cpu: float = 32,
) -> tuple[Session, TaskInfo]:
    cluster = [make_node(n, cpu=cpu, gpus=4, memory_gib=256) for n in nodes]
    snapshot = Snapshot.build(nodes=cluster, queues=[make_queue("default")], jobs=[*others, pod])
    cfg = config(["allocate"], [(plugin, dict(args or {}))])
    session = open_session(snapshot, cfg, now=0.0)
    task = next(t for t in snapshot.jobs[pod.name].tasks if t.status is TaskStatus.PENDING)
    return session, task


def scores(session: Session, task: TaskInfo) -> list[float]:
    nodes = np.arange(len(session.snapshot.nodes), dtype=np.intp)
    return [float(s) for s in session.points.node_score(task, nodes)]


def test_bestfit_scores_what_the_task_would_leave_free_on_cpu_and_gpu() -> None:
    pod = make_job("pod", gpus=1, cpu=1, created=1)
    session, task = session_for("bestfit", pod, [running("busy", "b", 1, (0,))])
    # a: 31000 cpu and 3000 milli-GPU left -> 100 x (1 - 0.5 x 31000/128000 - 0.5 x 3000/8000)
    # b: 30000 and 2000 left -> 100 x (1 - 0.1171875 - 0.125) = 75.78
    assert scores(session, task) == [69.0, 75.0, 69.0]


def test_bestfit_gives_a_share_the_fullest_card_that_holds_it() -> None:
    pod = make_job("pod", gpus=0.3, created=2)
    others = [running("s1", "a", 0.5, (1,)), running("s2", "a", 0.6, (2,))]
    session, task = session_for("bestfit", pod, others)
    # card 2 has 400 free, card 1 500, cards 0 and 3 1000: 400 is the least that holds 300
    assert session.points.gpu_select(task, 0) == (2,)


def test_dotprod_prefers_the_node_whose_free_vector_aligns_least_with_the_task() -> None:
    pod = make_job("pod", gpus=1, cpu=8, created=1)
    others = [running("busy", "b", 3, (0, 1, 2), cpu=16)]
    session, task = session_for("dotprod", pod, others, nodes=("a", "b"))
    # a: (32000/128000)(8000/128000) + (4000/8000)(1000/8000) = 0.078125 -> 100 x (1 - 0.039)
    # b: (15000/128000)(8000/128000) + (1000/8000)(1000/8000) = 0.0229 -> 100 x (1 - 0.0115)
    assert scores(session, task) == [96.0, 98.0]


def test_gpupacking_prefers_partly_used_cards_then_used_nodes_then_free_nodes() -> None:
    others = [running("share", "b", 0.4, (0,)), running("two", "c", 2, (0, 1))]
    share = make_job("pod", gpus=0.5, created=1)
    session, task = session_for("gpupacking", share, others)
    # a: every card free, 4 of them -> max(33 - 4, 4); b: the 600-free card, 60% free ->
    # 100 - 60 // 10; c: must open a free card -> max(50 - 1, 33)
    assert scores(session, task) == [29.0, 94.0, 49.0]
    whole = make_job("pod", gpus=2, created=1)
    session, task = session_for("gpupacking", whole, others)
    assert scores(session, task) == [29.0, 48.0, 48.0]
    cpu_only = make_job("pod", gpus=0, created=1)
    session, task = session_for("gpupacking", cpu_only, others)
    assert scores(session, task) == [0.0, 0.0, 0.0]


def test_gpuclustering_keeps_tasks_of_one_gpu_shape_together() -> None:
    others = [running("share", "b", 0.4, (0,)), running("one", "c", 1, (0,))]
    pod = make_job("pod", gpus=0.5, created=1)
    session, task = session_for("gpuclustering", pod, others)
    # used = 25 x (8000 - free milli-GPU) // 8000: a 12 (idle node: +25), b 13 (only shares:
    # +75), c 15 (only other shapes: +0)
    assert scores(session, task) == [37.0, 88.0, 15.0]
    mixed = [*others, running("one-on-b", "b", 1, (1,))]
    session, task = session_for("gpuclustering", pod, mixed)
    assert scores(session, task)[1] == 50 + 25 * (8000 - 2600) // 8000  # shares and others


def test_random_is_a_pure_function_of_seed_task_and_node() -> None:
    pod = make_job("pod", gpus=0.5, created=1)
    first = scores(*session_for("random", pod, args={"seed": 7}))
    again = scores(*session_for("random", pod, args={"seed": 7}))
    other = scores(*session_for("random", pod, args={"seed": 8}))
    assert first == again != other
    assert all(0 <= s < 100 for s in first)
    session, task = session_for("random", pod, [running("s", "a", 0.6, (1,))], args={"seed": 7})
    assert session.points.gpu_select(task, 0) in {(0,), (2,), (3,)}  # card 1 cannot hold it


def test_random_spreads_tasks_over_the_nodes() -> None:
    cluster = [make_node(n, cpu=1000, gpus=8, memory_gib=1000) for n in "abcd"]
    jobs = [make_job(f"p{i}", gpus=0.1, cpu=0.1, memory_gib=0.1, created=i) for i in range(80)]
    snapshot = Snapshot.build(nodes=cluster, queues=[make_queue("default")], jobs=jobs)
    cfg = config(["allocate"], [("random", {"seed": 3})])
    placed = [b.node for b in run_cycle(snapshot, cfg, now=0.0).binds]
    counts = [placed.count(n) for n in "abcd"]
    assert sum(counts) == 80 and min(counts) >= 10  # uniform: 20 each expected


TARGET_06 = {"workload": [{"cpu": 1000, "gpu": 0.6, "popularity": 1}]}


def test_fgd_fills_the_fragment_a_share_can_use_and_spares_whole_cards() -> None:
    # target: 0.6-GPU tasks. b has a 500-free card: 500 milli-GPU no target task can use.
    others = [running("half", "b", 0.5, (0,))]
    pod = make_job("pod", gpus=0.5, created=1)
    session, task = session_for("fgd", pod, others, args=TARGET_06, nodes=("a", "b"))
    # a: F 0 -> 500 (a card left at 500): 100 x sigmoid(-0.5) = 37.75
    # b: card 0 takes it, F 500 -> 0: 100 x sigmoid(0.5) = 62.2; card 1 would make F 1000
    assert scores(session, task) == [37.0, 62.0]
    assert session.points.gpu_select(task, 1) == (0,)


def test_fgd_without_integer_scores_gives_the_unrounded_sigmoid() -> None:
    # a: F 0 -> 500 and b: F 500 -> 0, as above; c: its 700-free card takes it, F 0 -> 200
    others = [running("half", "b", 0.5, (0,)), running("most", "c", 0.3, (0,))]
    pod = make_job("pod", gpus=0.5, created=1)
    sigmoid = [100 / (1 + np.exp(x)) for x in (0.5, -0.5, 0.2)]
    session, task = session_for("fgd", pod, others, args={**TARGET_06, "integerScores": False})
    assert scores(session, task) == pytest.approx(sigmoid, abs=1e-9)
    session, task = session_for("fgd", pod, others, args=TARGET_06)
    assert scores(session, task) == [float(int(x)) for x in sigmoid]


def test_fgd_scores_50_where_the_placement_changes_nothing_the_target_could_use() -> None:
    pod = make_job("pod", gpus=1, created=1)
    others = [running("half", "b", 0.5, (0,))]
    session, task = session_for("fgd", pod, others, args=TARGET_06, nodes=("a", "b"))
    # a: a whole card goes, the other three still hold 0.6 tasks: F stays 0. b: F 500 -> 500
    assert scores(session, task) == [50.0, 50.0]
    assert session.points.gpu_select(task, 0) is None  # whole cards: the lowest free ones


def test_fgd_cpu_shortage_makes_free_gpu_a_fragment() -> None:
    # a 30-core task on a 32-core node leaves 2 cores: no 3-core target task fits any more
    target = {"workload": [{"cpu": 3000, "gpu": 1, "popularity": 1}]}
    pod = make_job("pod", gpus=0, cpu=30, created=1)
    session, task = session_for("fgd", pod, args=target, nodes=("a",))
    assert scores(session, task) == [float(int(100 / (1 + np.exp(4.0))))]  # F 0 -> 4000


def test_fgd_learns_the_target_from_the_newest_jobs() -> None:
    # no workload arg: the newest job (a 0.6 share) is the target with window 1
    others = [running("half", "b", 0.5, (0,)), running("newest", "b", 0.6, (1,))]
    others[1] = replace(others[1], creation_time=5.0)
    pod = make_job("pod", gpus=0.5, created=1)
    session, task = session_for("fgd", pod, others, args={"window": 1}, nodes=("a", "b"))
    assert scores(session, task) == [37.0, 62.0]


def model_session(
    pod: Job, others: Sequence[Job] = (), *, args: Mapping[str, object]
) -> tuple[Session, TaskInfo]:
    """Node a has T4 cards, node b P100 cards; both 32 cores and 4 GPUs."""
    cluster = [
        replace(make_node(n, cpu=32, gpus=4, memory_gib=256), labels={GPU_MODEL_LABEL: model})
        for n, model in (("a", "T4"), ("b", "P100"))
    ]
    snapshot = Snapshot.build(nodes=cluster, queues=[make_queue("default")], jobs=[*others, pod])
    session = open_session(snapshot, config(["allocate"], [("fgd", dict(args))]), now=0.0)
    task = next(t for t in snapshot.jobs[pod.name].tasks if t.status is TaskStatus.PENDING)
    return session, task


T4_ONLY = [
    NodeSelectorRequirement(key=GPU_MODEL_LABEL, operator=SelectorOperator.IN, values=("T4",))
]


def test_fgd_counts_the_gpus_of_a_model_the_target_cannot_use_as_fragment() -> None:
    # target: 0.6-GPU tasks that run on T4 only. All of b's free GPU is a fragment for them.
    target = {"workload": [{"cpu": 1000, "gpu": 0.6, "gpuModels": ["T4"], "popularity": 1}]}
    pod = make_job("pod", gpus=0.5, created=1)
    session, task = model_session(pod, args=target)
    # a: F 0 -> 500 (a card left at 500): 37. b: F 4000 -> 3500: 100 x sigmoid(0.5) = 62
    assert scores(session, task) == [37.0, 62.0]
    anywhere = {"workload": [{"cpu": 1000, "gpu": 0.6, "popularity": 1}]}
    session, task = model_session(pod, args=anywhere)
    assert scores(session, task) == [37.0, 37.0]  # without the constraint both are alike


def test_fgd_learns_the_gpu_models_of_the_target_from_node_affinity() -> None:
    newest = make_job("newest", gpus=0.6, created=5, running_on=["a"], affinity=T4_ONLY)
    pod = make_job("pod", gpus=0.5, created=1)
    session, task = model_session(pod, [newest], args={"window": 1})
    # a holds 0.4 free on card 0 after newest: F_a = 400; the pod there makes it 400 or 900
    # (card 0 cannot take it), so a scores sigmoid(-0.5) = 37; b as above: 62
    assert scores(session, task) == [37.0, 62.0]


def test_gpu_models_of_a_role_meet_its_selector_and_affinity() -> None:
    def role(**kwargs: object) -> Role:
        return Role(name="r", replicas=1, resources=res(1, 1, 1), **kwargs)  # type: ignore[arg-type]

    both = NodeSelectorRequirement(
        key=GPU_MODEL_LABEL, operator=SelectorOperator.IN, values=("T4", "P100")
    )
    other = NodeSelectorRequirement(key="zone", operator=SelectorOperator.IN, values=("z1",))
    assert gpu_models(role()) == ()
    assert gpu_models(role(affinity=(both, other))) == ("P100", "T4")
    assert gpu_models(role(affinity=(both,), node_selector={GPU_MODEL_LABEL: "T4"})) == ("T4",)
    assert gpu_models(role(affinity=(other,))) == ()
    assert gpu_models(role(gpu_types=("T4", "V100"))) == ("T4", "V100")
    assert gpu_models(role(gpu_types=("T4", "V100"), affinity=(both,))) == ("T4",)


def test_fgd_with_memory_counts_a_node_left_without_memory_as_fragment() -> None:
    # target: 0.6-GPU tasks asking 100 GiB of memory; nodes have 256 GiB, b 156 free
    target = [{"cpu": 1000, "memory": 100 * 2**30, "gpu": 0.6, "popularity": 1}]
    hog = make_job("pod", gpus=0.5, memory_gib=100, created=1)
    others = [running("busy", "b", 0.5, (0,), memory_gib=100)]
    args = {"workload": target, "memory": True}
    session, task = session_for("fgd", hog, others, args=args, nodes=("a", "b"))
    # a: 156 GiB left, the target still fits: F 0 -> 500 (a card left at 500): 37.
    # b: 56 GiB left, the target fits no more: F 500 -> 3000 (all free GPU): sigmoid(-2.5)
    assert scores(session, task) == [37.0, 7.0]
    # memory-blind, b looks best: the pod fills the 500 card, F 500 -> 0
    blind, task = session_for("fgd", hog, others, args={"workload": target}, nodes=("a", "b"))
    assert scores(blind, task) == [37.0, 62.0]


def test_a_learnt_target_with_memory_asks_for_the_median_memory_of_each_shape() -> None:
    jobs = [
        make_job(f"p{i}", gpus=0.5, memory_gib=m, created=i) for i, m in enumerate((10, 60, 20))
    ]
    snapshot = Snapshot.build(
        nodes=[make_node("a", gpus=4)], queues=[make_queue("default")], jobs=jobs
    )
    learnt = learn(snapshot, window=10, coverage=1.0, memory=True)
    assert learnt is not None and [s.memory for s in learnt.shapes] == [20 * 2.0**30]
    blind = learn(snapshot, window=10, coverage=1.0)
    assert blind is not None and [s.memory for s in blind.shapes] == [0.0]


def _learnt_from_scratch(snapshot: Snapshot, window: int) -> Learnt:
    """The newest ``window`` jobs' shapes, counted and given their median memory."""
    newest = sorted(snapshot.jobs.values(), key=lambda j: (j.creation_time, j.name))[-window:]
    tasks = [(t, t.role.spec.resources) for job in newest for t in job.tasks]
    shapes = [TaskShape(cpu=r.get("cpu"), gpu=r.get("gpu")) for _, r in tasks]
    target = workload_distribution(shapes, coverage=1.0)
    memory: dict[TaskShape, list[float]] = {}
    for shape, (_, r) in zip(shapes, tasks, strict=True):
        memory.setdefault(shape, []).append(r.get("memory"))
    with_memory = tuple(replace(s, memory=float(np.median(memory[s]))) for s in target.shapes)
    return with_memory, target.popularity.tolist()


def test_a_target_learnt_across_sessions_follows_jobs_that_come_go_and_are_replaced() -> None:
    state = ClusterState([make_node("a", gpus=4)], [make_queue("default")])
    recent = RecentJobs(state.snapshot, 3, follow=True)
    rng = random.Random(7)
    names: list[str] = []

    def job(name: str) -> Job:
        gpus, memory = rng.choice((0.5, 0.25, 1.0, 2.0)), rng.choice((1, 2, 4, 8))
        return make_job(name, gpus=gpus, memory_gib=memory, created=rng.randrange(20))

    for step in range(60):
        move = rng.random()
        if names and move < 0.3:  # a job leaves
            state.remove_job(names.pop(rng.randrange(len(names))))
        elif names and move < 0.45:  # replaced under the same name before the next session
            name = rng.choice(names)
            state.remove_job(name)
            state.add_job(job(name))
        else:
            names.append(f"p{step}")
            state.add_job(job(names[-1]))
        kept = learn(state.snapshot, window=3, coverage=1.0, memory=True, recent=recent)
        if not names:
            assert kept is None
            continue
        assert kept is not None
        assert (kept.shapes, kept.popularity.tolist()) == _learnt_from_scratch(state.snapshot, 3)


def test_jobs_read_in_at_once_count_as_the_same_jobs_followed_one_by_one() -> None:
    rng = random.Random(11)
    jobs = [
        make_job(
            f"j{i}",
            gpus=rng.choice((0.5, 0.25, 1.0, 2.0)),
            memory_gib=rng.choice((1, 2, 4)),
            created=rng.randrange(30),
        )
        for i in range(40)
    ]
    state = ClusterState([make_node("a", gpus=4)], [make_queue("default")])
    followed = RecentJobs(state.snapshot, 7, follow=True)
    for job in jobs:
        state.add_job(job)
    at_once = RecentJobs(state.snapshot, 7)

    assert at_once.order == followed.order
    assert +at_once.counts == +followed.counts
    assert {i: m for i, m in at_once.memory.items() if m} == {
        i: m for i, m in followed.memory.items() if m
    }
    learnt = learn(state.snapshot, window=7, coverage=1.0, memory=True, recent=at_once)
    assert learnt is not None
    assert (learnt.shapes, learnt.popularity.tolist()) == _learnt_from_scratch(state.snapshot, 7)


def test_with_relearn_a_target_is_kept_until_that_many_jobs_came_or_went() -> None:
    state = ClusterState([make_node("a", gpus=4)], [make_queue("default")])
    recent = RecentJobs(state.snapshot, 10, follow=True)
    state.add_job(make_job("first", gpus=1))
    first = learn(state.snapshot, window=10, coverage=1.0, recent=recent, relearn=3)
    assert first is not None and first.shapes[0].gpu == 1.0

    state.add_job(make_job("share-1", gpus=0.5, created=1))
    state.remove_job("first")  # two changes to the window: the first target stands
    kept = learn(state.snapshot, window=10, coverage=1.0, recent=recent, relearn=3)
    assert kept is first

    state.add_job(make_job("share-2", gpus=0.5, created=2))  # the third: learnt again
    fresh = learn(state.snapshot, window=10, coverage=1.0, recent=recent, relearn=3)
    assert fresh is not None and fresh.shapes == (replace(first.shapes[0], gpu=0.5),)
    assert fresh.popularity.tolist() == [1.0]


def test_fgd_refuses_a_malformed_workload() -> None:
    with pytest.raises(PluginError, match="workload"):
        FgdPlugin({"workload": [{"cpu": 1, "gpus": 1}]})
    with pytest.raises(PluginError, match="workload"):
        FgdPlugin({"workload": [{"gpu": 1.5}]})
    with pytest.raises(PluginError, match="gpuModels"):
        FgdPlugin({"workload": [{"gpu": 1, "gpuModels": "T4"}]})
    with pytest.raises(PluginError, match="coverage"):
        FgdPlugin({"coverage": 2})
    with pytest.raises(PluginError, match="memory"):
        FgdPlugin({"memory": "yes"})
    with pytest.raises(PluginError, match="relearn"):
        FgdPlugin({"relearn": 0})
    with pytest.raises(PluginError, match="integerScores"):
        FgdPlugin({"integerScores": "no"})


def test_fgd_memo_gives_what_a_fresh_snapshot_gives_after_placements() -> None:
    cluster = [make_node(n, cpu=16, gpus=4, memory_gib=64) for n in "abc"]
    target = {"workload": [{"cpu": 1000, "gpu": g, "popularity": 1} for g in (0.3, 0.6, 1)]}
    cfg = config(["allocate"], [("fgd", target)])
    jobs = [make_job(f"p{i}", gpus=(0.3, 0.5, 1, 0.6)[i % 4], created=i) for i in range(10)]
    state = ClusterState(cluster, [make_queue("default")])
    for job in jobs[:6]:
        state.add_job(job)
    placed: dict[str, Job] = {}
    for bind in state.cycle(cfg, now=0.0).binds:  # the memo now holds the states seen
        task = state.job(bind.job).tasks[bind.index]
        state.set_task(task, TaskPhase.BOUND, bind.node, gpus=bind.gpus)
        job = next(j for j in jobs if j.name == bind.job)
        bound = Task(role="worker", index=0, phase=TaskPhase.BOUND, node=bind.node, gpus=bind.gpus)
        placed[job.name] = replace(job, phase=JobPhase.RUNNING, tasks=(bound,))
    for job in jobs[6:]:
        state.add_job(job)
    memoised = state.cycle(cfg, now=1.0)
    rebuilt = [placed.get(job.name, job) for job in jobs if job.name in placed or job in jobs[6:]]
    fresh = run_cycle(
        Snapshot.build(nodes=cluster, queues=[make_queue("default")], jobs=rebuilt), cfg, now=1.0
    )
    assert placed and memoised.binds
    assert [(b.job, b.node, b.gpus) for b in memoised.binds] == [
        (b.job, b.node, b.gpus) for b in fresh.binds
    ]
