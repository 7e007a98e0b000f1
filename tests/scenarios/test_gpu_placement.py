"""GPU placement inside nodes: topology-aware sets, exclusive NICs, shared cards."""

from __future__ import annotations

from dataclasses import replace

from phalanx.domain.job import Job
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import GpuTopology, preset
from phalanx.engine.decisions import Decisions
from tests.builders import config, cycle, make_job, res

GiB = 2**30
PLAIN = config(["allocate"], ["gang", "predicates"])
TOPOLOGY = config(["allocate"], ["gang", "predicates", "gpu-topology"])
SHARE = config(["allocate"], ["gang", "predicates", "gpu-share"])


def topology_node(name: str, topology: GpuTopology, memory_gib: float = 32) -> Node:
    cards = tuple(
        Gpu(
            index=i,
            memory=memory_gib * GiB,
            numa=topology.numa[i],
            nvlink_peers=topology.nvlink_peers(i),
        )
        for i in range(topology.count)
    )
    capacity = res(96, 512, topology.count) + Resources.of(
        {"gpu-memory": topology.count * memory_gib * GiB}
    )
    return Node(name=name, capacity=capacity, gpus=cards, gpu_topology=topology)


def holding(job: Job, *gpus: tuple[int, ...]) -> Job:
    """``job`` (running) with its tasks holding these cards."""
    return replace(
        job, tasks=tuple(replace(t, gpus=g) for t, g in zip(job.tasks, gpus, strict=False))
    )


def cards_of(decisions: Decisions, job: str) -> list[tuple[int, ...]]:
    return [b.gpus for b in decisions.binds if b.job == job]


def test_a_4_gpu_job_on_a_dgx1_gets_a_fully_nvlinked_quad() -> None:
    dgx1 = preset("dgx1-v100")
    busy = holding(make_job("busy", gpus=1, running_on=["dgx"]), (1,))
    quad = make_job("quad", gpus=4, created=1)
    nodes = [topology_node("dgx", dgx1)]
    (chosen,) = cards_of(cycle(nodes, [busy, quad], TOPOLOGY), "quad")
    assert chosen == (4, 5, 6, 7)
    assert dgx1.score(chosen).worst.is_nvlink
    (naive,) = cards_of(cycle(nodes, [busy, quad], PLAIN), "quad")
    assert not dgx1.score(naive).worst.is_nvlink  # the lowest free ids straddle the quads


def test_a_single_gpu_keeps_the_other_quad_whole() -> None:
    dgx1 = preset("dgx1-v100")
    first = holding(make_job("first", gpus=1, running_on=["dgx"]), (5,))
    one = make_job("one", gpus=1, created=1)
    decisions = cycle([topology_node("dgx", dgx1)], [first, one], TOPOLOGY)
    (chosen,) = cards_of(decisions, "one")
    assert dgx1.numa[chosen[0]] == dgx1.numa[5]  # packed into the quad already in use


def test_two_tasks_of_a_multi_node_job_on_one_node_get_disjoint_nics() -> None:
    dgx1 = preset("dgx1-v100")  # 8 GPUs, 4 NICs
    job = make_job("ddp", gpus=4, replicas=2)
    decisions = cycle([topology_node("dgx", dgx1)], [job], TOPOLOGY)
    binds = [b for b in decisions.binds if b.job == "ddp"]
    assert len(binds) == 2
    assert all(b.nics for b in binds)
    assert not set(binds[0].nics) & set(binds[1].nics)
    assert {g for b in binds for g in b.gpus} == set(range(8))


def test_multi_node_pairs_take_one_nic_each_so_four_fit_on_four_nics() -> None:
    dgx1 = preset("dgx1-v100")
    job = make_job("pairs", gpus=2, replicas=4)
    decisions = cycle([topology_node("dgx", dgx1)], [job], TOPOLOGY)
    binds = [b for b in decisions.binds if b.job == "pairs"]
    assert len(binds) == 4
    nics = [n for b in binds for n in b.nics]
    assert len(nics) == len(set(nics)) == 4  # every pair behind its own PCIe switch and NIC


def test_a_nic_held_by_a_multi_node_task_is_not_given_to_another() -> None:
    dgx1 = preset("dgx1-v100")
    other = holding(make_job("other", gpus=2, replicas=2, running_on=["dgx"]), (0, 1))
    one_more = make_job("more", gpus=1, replicas=2, created=1)
    decisions = cycle([topology_node("dgx", dgx1)], [other, one_more], TOPOLOGY)
    for gpus in cards_of(decisions, "more"):
        assert gpus[0] not in (0, 1)  # GPUs 0 and 1 share mlx5_0 with "other"'s task


def test_nodes_are_ranked_by_the_best_set_they_offer() -> None:
    dgx1 = preset("dgx1-v100")
    # node a has 4 free GPUs but no NVLinked quad among them; node b has a whole quad
    a_busy = holding(make_job("a-busy", gpus=4, running_on=["a"]), (0, 1, 4, 5))
    b_busy = holding(make_job("b-busy", gpus=4, running_on=["b"]), (0, 1, 2, 3))
    quad = make_job("quad", gpus=4, created=1)
    nodes = [topology_node("a", dgx1), topology_node("b", dgx1)]
    decisions = cycle(nodes, [a_busy, b_busy, quad], TOPOLOGY)
    assert [b.node for b in decisions.binds if b.job == "quad"] == ["b"]


def test_shared_gpu_tasks_fill_card_0_before_card_1() -> None:
    node = topology_node("n", preset("pcie-4gpu"), memory_gib=16)
    jobs = [make_job(f"s{i}", gpus=0.3, created=i) for i in range(4)]
    decisions = cycle([node], jobs, SHARE)
    assert [b.gpus for b in decisions.binds] == [(0,), (0,), (0,), (1,)]


def test_a_share_goes_to_the_fullest_card_that_still_fits() -> None:
    node = topology_node("n", preset("pcie-4gpu"), memory_gib=16)
    half = holding(make_job("half", gpus=0.5, running_on=["n"]), (2,))
    small = make_job("small", gpus=0.25, created=1)
    assert cards_of(cycle([node], [half, small], SHARE), "small") == [(2,)]
    assert cards_of(cycle([node], [half, small], PLAIN), "small") == [(0,)]


def test_a_share_prefers_the_node_with_a_partly_used_card() -> None:
    nodes = [
        topology_node("empty", preset("pcie-4gpu")),
        topology_node("used", preset("pcie-4gpu")),
    ]
    used = holding(make_job("used", gpus=0.5, running_on=["used"]), (3,))
    small = make_job("small", gpus=0.25, created=1)
    decisions = cycle(nodes, [used, small], SHARE)
    assert [(b.node, b.gpus) for b in decisions.binds if b.job == "small"] == [("used", (3,))]


def memory_share(name: str, gib: float, created: float = 0) -> Job:
    """A one-task job asking for ``gib`` GiB of one card's memory (no compute share)."""
    job = make_job(name, created=created)
    resources = res(1, 1) + Resources.of({"gpu-memory": gib * GiB})
    return replace(job, roles=(replace(job.roles[0], resources=resources),))


def test_a_share_carries_its_isolation_for_the_executor() -> None:
    node = topology_node("n", preset("pcie-4gpu"), memory_gib=16)
    decisions = cycle([node], [make_job("half", gpus=0.5), memory_share("mem", 10, 1)], SHARE)
    share = {b.job: b.share for b in decisions.binds}
    assert share["half"] is not None and share["half"].compute_percent == 50
    assert share["half"].memory_limit == 8 * GiB
    assert share["mem"] is not None and share["mem"].compute_percent == 100
    assert share["mem"].memory_limit == 10 * GiB


def test_memory_shares_never_exceed_a_cards_memory() -> None:
    node = topology_node("n", preset("pcie-4gpu"), memory_gib=16)
    jobs = [memory_share(f"m{i}", 10, i) for i in range(5)]
    decisions = cycle([node], jobs, SHARE)
    assert sorted(b.gpus for b in decisions.binds) == [(0,), (1,), (2,), (3,)]
    (left,) = decisions.unschedulable
    assert left.job == "m4"
