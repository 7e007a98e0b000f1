"""hived: virtual clusters guaranteed whole cells (HiveD), bound by buddy allocation."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from phalanx.domain.cells import NodeCells, derive_levels
from phalanx.domain.job import Job
from phalanx.domain.node import Gpu, Node
from phalanx.domain.queue import Queue
from phalanx.domain.topology import preset
from phalanx.engine.decisions import Decisions, ReasonCode
from phalanx.spec.cluster import ClusterDocument
from phalanx.spec.loader import load_documents
from tests.builders import bound, config, cycle, evicted, make_job, make_queue, res
from tests.scenarios.world import World

DGX1 = preset("dgx1-v100")
#: dgx1-gpu (1), dgx1-nvlink (4: an NVLinked quad), dgx1-node (8)
LEVELS = derive_levels(8, DGX1, "dgx1")
NODE, QUAD = "dgx1-node", "dgx1-nvlink"
HIVED = config(["allocate", "reclaim", "preempt"], ["priority", "gang"], ["predicates", "hived"])
WITHOUT = config(["allocate", "reclaim", "preempt"], ["priority", "gang"], ["predicates"])


def dgx(name: str) -> Node:
    cards = tuple(Gpu(index=i, numa=DGX1.numa[i]) for i in range(8))
    return Node(
        name=name,
        capacity=res(64, 512, 8),
        gpus=cards,
        gpu_topology=DGX1,
        cells=NodeCells(levels=LEVELS),
    )


def dgxs(count: int) -> list[Node]:
    return [dgx(f"dgx-{i}") for i in range(count)]


def holding(job: Job, *gpus: tuple[int, ...]) -> Job:
    """``job`` (running) with its tasks holding these cards."""
    return replace(
        job, tasks=tuple(replace(t, gpus=g) for t, g in zip(job.tasks, gpus, strict=False))
    )


def cards_of(decisions: Decisions, job: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(b.node, b.gpus) for b in decisions.binds if b.job == job]


def scattered(count: int = 4, *, preemptible: bool = True) -> list[Job]:
    """Queue b's 4-GPU jobs, one on GPUs 0-3 of each node: 4 GPUs free on every node."""
    return [
        holding(
            make_job(f"b{i}", queue="b", gpus=4, running_on=[f"dgx-{i}"], preemptible=preemptible),
            (0, 1, 2, 3),
        )
        for i in range(count)
    ]


def tenants(**cells: dict[str, int]) -> list[Queue]:
    return [make_queue(name.replace("_", "-"), cells=c) for name, c in cells.items()] + [
        make_queue("b")
    ]


def test_sixteen_scattered_gpus_are_not_two_nvlink_nodes_so_two_whole_nodes_are_freed() -> None:
    queues = tenants(vc_a={NODE: 2})
    wanted = make_job("a", queue="vc-a", gpus=8, replicas=2, created=5)
    decisions = cycle(dgxs(4), [*scattered(), wanted], HIVED, queues=queues)
    assert not bound(decisions, "a")  # 16 GPUs are free, but no 8-GPU node cell is
    assert sorted(evicted(decisions)) == ["b0-worker-0", "b1-worker-0"]
    assert sorted(p.node for p in decisions.pipelined if p.job == "a") == ["dgx-0", "dgx-1"]
    # once the evicted work is gone, the two node cells are its: all 8 GPUs of each node
    world = World(nodes=dgxs(4), queues=queues, config=HIVED)
    world.submit(*scattered(), wanted)
    world.run([0.0, 1.0])
    assert sorted(world.placed("a")) == ["dgx-0", "dgx-1"]
    assert {t.gpus for t in world.jobs["a"].all_tasks()} == {tuple(range(8))}
    # the evicted work came back on the other halves of dgx-2 and dgx-3, and stays
    assert world.placed("b0") + world.placed("b1") == ["dgx-2", "dgx-3"]
    world.run([2.0, 3.0])
    assert world.eviction_count() == 2


def test_without_hived_the_scattered_gpus_leave_the_tenant_stuck() -> None:
    queues = tenants(vc_a={NODE: 2})
    wanted = make_job("a", queue="vc-a", gpus=8, replicas=2, created=5)
    decisions = cycle(dgxs(4), [*scattered(), wanted], WITHOUT, queues=queues)
    assert not bound(decisions, "a") and not decisions.evictions


def test_others_are_placed_outside_the_cells_the_tenant_is_guaranteed() -> None:
    world = World(nodes=dgxs(4), queues=tenants(vc_a={NODE: 2}), config=HIVED)
    world.submit(*(make_job(f"b{i}", queue="b", gpus=4, created=i) for i in range(4)))
    world.step(0.0)
    assert sorted({world.placed(f"b{i}")[0] for i in range(4)}) == ["dgx-0", "dgx-1"]
    world.submit(make_job("a", queue="vc-a", gpus=8, replicas=2, created=5))
    decisions = world.step(1.0)
    assert sorted(bound(decisions, "a")) == ["dgx-2", "dgx-3"] and not decisions.evictions


def test_a_four_gpu_job_in_a_vc_of_quads_lands_in_one_nvlink_quad() -> None:
    busy = holding(make_job("busy", queue="b", gpus=1, running_on=["dgx-0"]), (1,))
    quad = make_job("quad", queue="vc-q", gpus=4, created=1)
    decisions = cycle(dgxs(1), [busy, quad], HIVED, queues=tenants(vc_q={QUAD: 1}))
    ((_, gpus),) = cards_of(decisions, "quad")
    assert gpus == (4, 5, 6, 7) and DGX1.score(gpus).worst.is_nvlink


def test_smaller_jobs_get_the_smallest_cell_that_holds_them_packed_in_the_vcs_cell() -> None:
    queues = tenants(vc_n={NODE: 1})
    jobs = [make_job(f"p{i}", queue="vc-n", gpus=2, created=i) for i in range(2)]
    jobs.append(make_job("q", queue="vc-n", gpus=4, created=3))
    decisions = cycle(dgxs(2), jobs, HIVED, queues=queues)
    placed = {b.job: (b.node, b.gpus) for b in decisions.binds}
    assert {node for node, _ in placed.values()} == {"dgx-0"}  # all inside its one node cell
    assert placed["p0"][1] == (0, 1) and placed["p1"][1] == (2, 3)  # one quad, packed
    assert placed["q"][1] == (4, 5, 6, 7)


def test_an_opportunistic_job_is_evicted_when_the_guaranteed_tenant_needs_its_cell() -> None:
    queues = tenants(vc_q={QUAD: 1})
    b0 = holding(make_job("b0", queue="b", gpus=4, running_on=["dgx-0"]), (0, 1, 2, 3))
    b1 = holding(make_job("b1", queue="b", gpus=4, running_on=["dgx-0"], created=1), (4, 5, 6, 7))
    mine = make_job("mine", queue="vc-q", gpus=4, created=5)
    decisions = cycle(dgxs(1), [b0, b1, mine], HIVED, queues=queues)
    assert evicted(decisions) == ["b0-worker-0"]  # the quad the buddy rule binds: dgx-0/0-3
    assert [p.node for p in decisions.pipelined] == ["dgx-0"]


def test_guaranteed_work_is_never_evicted_for_other_queues() -> None:
    queues = tenants(vc_q={QUAD: 2})
    mine = holding(
        make_job("mine", queue="vc-q", gpus=4, running_on=["dgx-0"] * 2, replicas=2),
        (0, 1, 2, 3),
        (4, 5, 6, 7),
    )
    urgent = make_job("urgent", queue="b", gpus=8, priority=100, created=5)
    decisions = cycle(dgxs(1), [mine, urgent], HIVED, queues=queues)
    assert not decisions.evictions


def test_a_tenant_whose_cells_hold_unevictable_work_is_told_why_it_waits() -> None:
    queues = tenants(vc_a={NODE: 2})
    wanted = make_job("a", queue="vc-a", gpus=8, replicas=2, created=5)
    decisions = cycle(dgxs(4), [*scattered(preemptible=False), wanted], HIVED, queues=queues)
    (left,) = [u for u in decisions.unschedulable if u.job == "a"]
    message = left.reason.message
    assert "queue vc-a: task worker needs one free 8-GPU dgx1-node cell" in message
    assert "its 2 guaranteed cell(s) are busy" in message and "fix:" in message


def test_guarantees_the_cells_cannot_hold_are_refused_by_queue() -> None:
    queues = tenants(vc_a={NODE: 3}, vc_b={NODE: 3})
    jobs = [make_job("ja", queue="vc-a", gpus=8), make_job("jb", queue="vc-b", gpus=8)]
    decisions = cycle(dgxs(4), jobs, HIVED, queues=queues)
    assert bound(decisions, "ja")
    (refused,) = decisions.unschedulable
    assert refused.job == "jb" and refused.reason.code is ReasonCode.INVALID
    assert refused.reason.message.startswith("queue vc-b: spec.cells asks for 3 dgx1-node")
    assert "besides those of vc-a" in refused.reason.message


def test_an_unknown_cell_type_is_refused_with_the_known_ones() -> None:
    queues = tenants(vc_a={"dgx1-nod": 1})
    decisions = cycle(dgxs(1), [make_job("ja", queue="vc-a", gpus=8)], HIVED, queues=queues)
    (refused,) = decisions.unschedulable
    assert "'dgx1-nod', which no node has; fix: use one of dgx1-gpu, dgx1-node" in (
        refused.reason.message
    )


def test_a_vc_job_beyond_its_guarantee_runs_opportunistically_and_can_be_evicted() -> None:
    queues = tenants(vc_q={QUAD: 1}, vc_r={QUAD: 1})
    world = World(nodes=dgxs(1), queues=queues, config=HIVED)
    world.submit(*(make_job(f"q{i}", queue="vc-q", gpus=4, created=i) for i in range(2)))
    world.step(0.0)
    assert len(world.placed("q0") + world.placed("q1")) == 2  # the second beyond its quad
    world.submit(make_job("r", queue="vc-r", gpus=4, created=5))
    decisions = world.step(1.0)
    assert evicted(decisions) == ["q1-worker-0"]  # the opportunistic one, not q0


RACKS = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  cellTypes:
  - {name: v100-quad, childCellType: v100, childCellNumber: 4}
  - {name: dgx1-node, childCellType: v100-quad, childCellNumber: 2, isNodeLevel: true}
  - {name: dgx1-rack, childCellType: dgx1-node, childCellNumber: 2}
  nodeGroups:
  - name: dgx
    count: 4
    cellType: dgx1-rack
    resources: {cpu: 64, memory: 512Gi}
    gpus: {count: 8, topology: dgx1-v100}
"""


def test_a_rack_cell_keeps_a_multi_node_job_under_one_rack() -> None:
    (document,) = load_documents(textwrap.dedent(RACKS))
    assert isinstance(document, ClusterDocument)
    nodes = list(document.nodes())
    busy = holding(make_job("busy", queue="b", gpus=4, running_on=["dgx-1"]), (0, 1, 2, 3))
    job = make_job("big", queue="vc-r", gpus=8, replicas=2, created=1)
    decisions = cycle(nodes, [busy, job], HIVED, queues=tenants(vc_r={"dgx1-rack": 1}))
    assert sorted(bound(decisions, "big")) == ["dgx-2", "dgx-3"]  # the idle rack, whole


def test_same_input_same_decisions() -> None:
    queues = tenants(vc_a={NODE: 2}, vc_q={QUAD: 2})
    jobs = [
        *scattered(),
        make_job("a", queue="vc-a", gpus=8, replicas=2, created=5),
        make_job("q", queue="vc-q", gpus=2, replicas=3, created=6),
    ]
    first = cycle(dgxs(4), jobs, HIVED, queues=queues)
    assert cycle(dgxs(4), jobs, HIVED, queues=queues) == first


def test_without_eviction_actions_the_reason_names_the_cell_to_free() -> None:
    queues = tenants(vc_a={NODE: 1})
    mine = holding(make_job("mine", queue="vc-a", gpus=4, running_on=["dgx-0"]), (0, 1, 2, 3))
    other = holding(
        make_job("other", queue="b", gpus=4, running_on=["dgx-0"], created=1), (4, 5, 6, 7)
    )
    more = make_job("more", queue="vc-a", gpus=4, created=5)
    allocate_only = config(["allocate"], ["priority", "gang"], ["predicates", "hived"])
    decisions = cycle(dgxs(2), [mine, other, more], allocate_only, queues=queues)
    (left,) = decisions.unschedulable
    assert left.reason.code is ReasonCode.CELLS_BUSY
    assert left.reason.message == (
        "queue vc-a: task worker needs one free 4-GPU dgx1-nvlink cell; its 1 guaranteed "
        "cell(s) are busy: dgx-0 holds its own jobs and work of queue b; fix: reclaim or preempt evicts the "
        "4 GPU(s) of other work in dgx-0/4-7 (configure one of those actions if absent)"
    )


def test_in_its_own_cells_higher_priority_work_preempts_lower() -> None:
    queues = tenants(vc_q={QUAD: 1})
    low = holding(make_job("low", queue="vc-q", gpus=4, running_on=["dgx-0"]), (0, 1, 2, 3))
    other = holding(
        make_job("other", queue="b", gpus=4, running_on=["dgx-0"], created=1), (4, 5, 6, 7)
    )
    high = make_job("high", queue="vc-q", gpus=4, priority=10, created=5)
    decisions = cycle(dgxs(1), [low, other, high], HIVED, queues=queues)
    assert evicted(decisions) == ["low-worker-0"]  # its own quad; b's work is outside it
    assert [e.action for e in decisions.evictions] == ["preempt"]
