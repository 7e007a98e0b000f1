"""GPU types in the engine (``placement.gputypes``): the per-node index, when a job is held
to one type, the order types are tried in, eviction and network confinement on one type,
and the failure memo telling a typed gang from a mixed one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from phalanx.domain.job import Job, NetworkPlacement, Role
from phalanx.domain.node import GPU_MODEL_LABEL, Node
from phalanx.engine import Snapshot
from phalanx.engine.cycle import open_session
from phalanx.engine.placement.gputypes import gpu_type_index, placed_types, typing_of
from tests.builders import config, cycle, make_job, make_node, make_queue, res

CFG = config(["allocate"], ["priority", "gang"], ["predicates", "binpack"])
PREEMPT = config(["allocate", "preempt"], ["priority", "gang"], ["drf", "predicates", "binpack"])
NETWORK = config(["allocate"], ["priority", "gang"], ["predicates", "binpack", "network-topology"])


def _typed(name: str, model: str | None, gpus: int = 4, tor: str | None = None) -> Node:
    node = make_node(name, gpus=gpus, labels={GPU_MODEL_LABEL: model} if model else {})
    return node if tor is None else replace(node, network={"tor": tor})


def _snapshot(nodes: list[Node], jobs: list[Job]) -> Snapshot:
    return Snapshot.build(nodes=nodes, queues=[make_queue()], jobs=jobs)


def test_the_index_gives_gpu_nodes_their_type_and_cpu_nodes_none() -> None:
    nodes = [_typed("a", "A100"), _typed("b", None), _typed("c", "T4"), _typed("d", "T4", gpus=0)]
    index = gpu_type_index(_snapshot(nodes, []))
    assert index.names == ("", "A100", "T4")
    assert index.ids.tolist() == [1, 0, 2, -1]
    assert index.several
    one = gpu_type_index(_snapshot([_typed("a", "A100"), _typed("c", "T4", gpus=0)], []))
    assert one.names == ("A100",) and not one.several


def test_a_job_is_held_to_a_type_only_where_it_can_matter() -> None:
    two = [_typed("a", "A100"), _typed("t", "T4")]
    gpu, cpu = make_job("gpu", gpus=1), make_job("cpu", gpus=0)
    mixed = replace(make_job("mixed", gpus=1), allow_mixed_gpu_types=True)
    snap = _snapshot(two, [gpu, cpu, mixed])
    session = open_session(snap, CFG, now=0.0)
    typing = typing_of(session, snap.jobs["gpu"])
    assert typing is not None and typing.pinned is None
    assert typing_of(session, snap.jobs["cpu"]) is None
    assert typing_of(session, snap.jobs["mixed"]) is None
    same = _snapshot([_typed("a", "A100"), _typed("b", "A100")], [gpu])
    assert typing_of(open_session(same, CFG, now=0.0), same.jobs["gpu"]) is None


def test_a_running_job_is_pinned_to_the_type_of_most_of_its_tasks() -> None:
    nodes = [_typed("a", "A100"), _typed("t0", "T4"), _typed("t1", "T4")]
    job = make_job("j", gpus=1, replicas=4, running_on=["a", "t0", "t1"])
    snap = _snapshot(nodes, [job])
    typing = typing_of(open_session(snap, CFG, now=0.0), snap.jobs["j"])
    assert typing is not None and typing.pinned is not None
    assert typing.index.names[typing.pinned] == "T4"


def test_a_failed_typed_gang_does_not_stand_for_the_same_gang_allowed_to_mix() -> None:
    nodes = [_typed("a", "A100"), _typed("t", "T4")]
    typed = make_job("typed", gpus=2, replicas=3, created=0)
    mixed = replace(make_job("mixed", gpus=2, replicas=3, created=1), allow_mixed_gpu_types=True)
    decisions = cycle(nodes, [typed, mixed], CFG)
    assert {b.job for b in decisions.binds} == {"mixed"}
    reason = decisions.reason_for("typed")
    assert reason is not None and "of one GPU type" in reason.message


def test_two_jobs_pinned_to_different_types_are_not_one_shape() -> None:
    # each has one task running and one pending; only the T4 one has room on its type
    nodes = [_typed("a", "A100", gpus=1), _typed("t", "T4", gpus=2)]
    on_a = make_job("on-a", gpus=1, replicas=2, min_available=1, running_on=["a"])
    on_t = make_job("on-t", gpus=1, replicas=2, min_available=1, running_on=["t"], created=1)
    decisions = cycle(nodes, [on_a, on_t], CFG)
    assert [(b.job, b.node) for b in decisions.binds] == [("on-t", "t")]


def test_preemption_makes_room_on_one_type() -> None:
    # one GPU free on each node: the 2-GPU gang would fit across types at once; held to
    # one type, it evicts one task on the A100 node (both fit as well: the first by name)
    nodes = [_typed("a", "A100"), _typed("t", "T4")]
    low = [
        make_job(f"low-{n}-{i}", gpus=1, running_on=[n], created=i)
        for n in ("a", "t")
        for i in range(3)
    ]
    high = make_job("high", gpus=1, replicas=2, priority=10, created=9)
    decisions = cycle(nodes, [*low, high], PREEMPT)
    assert not decisions.binds
    assert [e.job.split("-")[1] for e in decisions.evictions] == ["a"]
    assert [p.node for p in decisions.pipelined if p.job == "high"] == ["a", "a"]
    mixed = replace(high, allow_mixed_gpu_types=True)
    decisions = cycle(nodes, [*low, mixed], PREEMPT)
    assert not decisions.evictions
    assert sorted(b.node for b in decisions.binds) == ["a", "t"]


def test_a_hard_network_gang_sits_under_one_switch_and_on_one_type() -> None:
    # tor-0 holds 8 A100 GPUs and 4 T4; tor-1 holds 8 T4: the 8-GPU gang fits tor-0 only
    # across types, so it goes to tor-1, all T4
    nodes = [
        _typed("a0", "A100", tor="tor-0"),
        _typed("a1", "A100", tor="tor-0"),
        _typed("t0", "T4", tor="tor-0"),
        _typed("t1", "T4", tor="tor-1"),
        _typed("t2", "T4", tor="tor-1"),
    ]
    job = replace(make_job("llm", gpus=4, replicas=3), network=NetworkPlacement(tier="tor"))
    decisions = cycle(nodes, [job], NETWORK)
    assert sorted(b.node for b in decisions.binds) == []  # 12 GPUs: no tor has 12 of one type
    job = replace(make_job("llm", gpus=4, replicas=2), network=NetworkPlacement(tier="tor"))
    decisions = cycle(nodes, [job], NETWORK)
    assert sorted(b.node for b in decisions.binds) in (["a0", "a1"], ["t1", "t2"])


def test_placed_types_names_the_types_a_job_holds() -> None:
    nodes = [_typed("a", "A100"), _typed("t", "T4")]
    job = make_job("j", gpus=1, replicas=2, running_on=["a", "t"])
    snap = _snapshot(nodes, [job])
    assert placed_types(gpu_type_index(snap), snap.jobs["j"]) == {"A100", "T4"}


def test_a_role_selector_excludes_other_types_whatever_plugins_run() -> None:
    nodes = [_typed("a", "A100"), _typed("t", "T4")]
    role = Role(name="w", replicas=1, resources=res(1, 1, 1), gpu_types=("T4",))
    bare = config(["allocate"], ["gang"])
    decisions = cycle(nodes, [make_job("j", roles=[role])], bare)
    assert [b.node for b in decisions.binds] == ["t"]
    snap = _snapshot(nodes, [make_job("j", roles=[role])])
    session = open_session(snap, bare, now=0.0)
    mask, excluded = session.static_mask(snap.jobs["j"].roles[0])
    assert mask.tolist() == [False, True]
    assert excluded == {"gpuTypes [T4]": 1}
    assert np.count_nonzero(mask) == 1
