"""GpuTopology: validation, queries and presets."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import (
    NODE,
    PHB,
    PIX,
    PRESETS,
    PXB,
    SELF,
    SYS,
    GpuTopology,
    Link,
    LinkLevel,
    Nic,
    nvlink,
    parse_link,
    preset,
    topology_from_tokens,
)


def test_levels_are_ordered_best_to_worst() -> None:
    order = [SELF, nvlink(18), nvlink(2), nvlink(1), PIX, PXB, PHB, NODE, SYS]
    assert sorted(order, key=lambda link: link.rank) == order
    assert [str(link) for link in order] == [
        "X",
        "NV18",
        "NV2",
        "NV1",
        "PIX",
        "PXB",
        "PHB",
        "NODE",
        "SYS",
    ]


@pytest.mark.parametrize(
    ("token", "link"),
    [("X", SELF), (" nv12 ", nvlink(12)), ("PIX", PIX), ("SOC", SYS), ("NODE", NODE)],
)
def test_parse_link(token: str, link: Link) -> None:
    assert parse_link(token) == link


@pytest.mark.parametrize("token", ["NV0", "NV", "QPI", "", "NV1000"])
def test_parse_link_refuses(token: str) -> None:
    with pytest.raises(InvalidInput, match="is not a link; fix: write X, NV<count>"):
        parse_link(token)


def test_nvlink_count_belongs_to_nvlink_only() -> None:
    with pytest.raises(InvalidInput, match="PIX link cannot carry 2 NVLinks"):
        Link(level=LinkLevel.PIX, nvlinks=2)
    with pytest.raises(InvalidInput, match="NVLINK link cannot carry 0"):
        Link(level=LinkLevel.NVLINK)


def test_dgx1_v100_queries() -> None:
    dgx1 = preset("dgx1-v100")
    assert dgx1.count == 8
    assert dgx1.link(0, 3) == nvlink(2) and dgx1.link(0, 1) == nvlink(1)
    assert dgx1.link(0, 5) == SYS and dgx1.link(2, 2) == SELF
    assert [dgx1.nvlink_peers(g) for g in (0, 7)] == [(1, 2, 3, 4), (3, 4, 5, 6)]
    # the hybrid cube-mesh: 6 NVLinks and 4 peers per GPU
    for gpu in range(8):
        assert sum(dgx1.link(gpu, p).nvlinks for p in dgx1.nvlink_peers(gpu)) == 6
    assert dict(dgx1.numa_domains()) == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
    assert [dgx1.nics[dgx1.nearest_nic(g) or 0].name for g in (0, 2, 5, 7)] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_3",
    ]


def test_score_prefers_fully_nvlinked_quads() -> None:
    dgx1 = preset("dgx1-v100")
    quad = dgx1.score({0, 1, 2, 3})
    straddling = dgx1.score({0, 1, 4, 5})  # 0-5 and 1-4 are SYS
    assert (quad.worst, quad.nvlink_pairs, quad.numa_nodes) == (nvlink(1), 6, 1)
    assert (straddling.worst, straddling.numa_nodes) == (SYS, 2)
    assert quad.better_than(straddling) and not straddling.better_than(quad)
    # between two NVLink pairs, the one with more bonded links wins
    assert dgx1.score([0, 3]).better_than(dgx1.score([0, 1]))
    assert dgx1.score([5]).worst == SELF


def test_score_ties_break_on_nvlink_pairs_then_numa() -> None:
    topology = topology_from_tokens(
        [
            ["X", "NV1", "SYS", "SYS"],
            ["NV1", "X", "SYS", "SYS"],
            ["SYS", "SYS", "X", "SYS"],
            ["SYS", "SYS", "SYS", "X"],
        ],
        numa=[0, 0, 0, 1],
    )
    with_pair = topology.score([0, 1, 2])
    without = topology.score([0, 2, 3])
    assert with_pair.worst == without.worst == SYS
    assert with_pair.better_than(without)
    assert topology.score([0, 2]).better_than(topology.score([0, 3]))  # one NUMA node, not two


def test_nearest_nic_ties_break_on_index_and_none_without_nics() -> None:
    topology = topology_from_tokens(
        [["X", "PIX"], ["PIX", "X"]],
        numa=[0, 0],
        nics={"b": ["PHB", "PIX"], "a": ["PHB", "SYS"]},
    )
    assert topology.nearest_nic(0) == 0  # both PHB: the first listed
    assert topology.nearest_nic(1) == 0
    assert preset("pcie-4gpu").nearest_nic(3) == 0
    assert topology_from_tokens([["X"]], numa=[0]).nearest_nic(0) is None


def test_presets_are_valid_and_symmetric() -> None:
    assert list(PRESETS) == ["dgx-a100", "dgx-h100", "dgx1-v100", "pcie-4gpu"]
    for name in PRESETS:
        topology = preset(name)
        assert topology == preset(name)  # a value: equal and hashable
        hash(topology)
        for a in range(topology.count):
            for b in range(topology.count):
                assert topology.link(a, b) == topology.link(b, a)
    a100, h100 = preset("dgx-a100"), preset("dgx-h100")
    assert {a100.link(0, 7), h100.link(3, 4)} == {nvlink(12), nvlink(18)}
    assert a100.score(range(8)).nvlink_pairs == 28
    assert [n.links[0] for n in a100.nics] == [PXB, PXB] + [SYS] * 6
    assert [str(link) for link in h100.nics[5].links] == [
        "SYS",
        "SYS",
        "SYS",
        "SYS",
        "NODE",
        "PIX",
        "NODE",
        "NODE",
    ]
    assert preset("pcie-4gpu").rows() == (
        "X PIX SYS SYS",
        "PIX X SYS SYS",
        "SYS SYS X PIX",
        "SYS SYS PIX X",
    )


def test_unknown_preset_names_the_closest_and_every_known_one() -> None:
    with pytest.raises(InvalidInput) as caught:
        preset("dgx-h10")
    assert caught.value.fix == (
        "did you mean 'dgx-h100'? known presets: dgx-a100, dgx-h100, dgx1-v100, pcie-4gpu; "
        "or give a matrix"
    )


@pytest.mark.parametrize(
    ("matrix", "numa", "nics", "message"),
    [
        ([], [], {}, "matrix: 0 GPUs"),
        ([["X", "PIX"]], [0], {}, "matrix[GPU0]: row GPU0 has 2 columns for 1 GPUs"),
        ([["PIX"]], [0], {}, "matrix[GPU0][GPU0]: PIX found; fix: write X here"),
        ([["X", "X"], ["X", "X"]], [0, 0], {}, "matrix[GPU0][GPU1]: X found"),
        (
            [["X", "PIX"], ["SYS", "X"]],
            [0, 0],
            {},
            "matrix[GPU1][GPU0]: SYS but GPU0 -> GPU1 is PIX",
        ),
        ([["X"]], [0, 1], {}, "numa: 2 NUMA nodes for 1 GPUs"),
        ([["X"]], [-1], {}, "numa: NUMA nodes cannot be negative"),
        ([["X"]], [0], {"ib0": ["PIX", "PIX"]}, "nics[ib0]: 2 links for 1 GPUs"),
        (
            [["X"]],
            [0],
            {"ib0": ["NV2"]},
            "nics[ib0][GPU0]: NV2 found; fix: a NIC reaches a GPU over PCIe",
        ),
        ([["X"]], [0], {"": ["PIX"]}, "nics: NIC name '' is empty or repeated"),
        # NIC names reach the task comma-separated (NCCL_IB_HCA): no comma, space, = or ^
        ([["X"]], [0], {"mlx5_0,mlx5_1": ["PIX"]}, "nics: 'mlx5_0,mlx5_1' cannot name a NIC"),
        ([["X"]], [0], {"^mlx5": ["PIX"]}, "nics: '^mlx5' cannot name a NIC"),
        ([["X"]], [0], {"ib 0": ["PIX"]}, "nics: 'ib 0' cannot name a NIC"),
        ([["X", "PXX"], ["PXB", "X"]], [0, 0], {}, "matrix[GPU0][GPU1]: 'PXX' is not a link"),
    ],
)
def test_invalid_topologies_name_the_cell_and_fix(
    matrix: list[list[str]], numa: list[int], nics: dict[str, list[str]], message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        topology_from_tokens(matrix, numa=numa, nics=nics)
    assert message in str(caught.value)
    assert caught.value.fix


def test_repeated_nic_names_are_refused() -> None:
    nic = Nic(name="ib0", links=(PIX,))
    with pytest.raises(InvalidInput, match="repeated"):
        GpuTopology(links=((SELF,),), numa=(0,), nics=(nic, nic))


def test_queries_refuse_unknown_gpus() -> None:
    topology = preset("pcie-4gpu")
    for query in (
        lambda: topology.link(0, 4),
        lambda: topology.nvlink_peers(-1),
        lambda: topology.score([9]),
    ):
        with pytest.raises(
            InvalidInput, match=r"GPU .* does not exist; fix: use an index from 0 to 3"
        ):
            query()
    with pytest.raises(InvalidInput, match="empty set"):
        topology.score([])


def test_node_carries_a_topology_of_its_gpu_count() -> None:
    topology = preset("pcie-4gpu")
    gpus = tuple(Gpu(index=i) for i in range(4))
    node = Node(name="n", capacity=Resources.of({"gpu": 4}), gpus=gpus, gpu_topology=topology)
    assert node.gpu_topology is topology
    with pytest.raises(InvalidInput, match="describes 4 GPUs but the node has 2"):
        Node(name="n", capacity=Resources.of({"gpu": 2}), gpus=gpus[:2], gpu_topology=topology)
