"""Cells: chains derived from GPU topologies, explicit chains, and what is refused."""

from __future__ import annotations

import pytest

from phalanx.domain.cells import (
    CellGuarantee,
    CellLevel,
    NodeCells,
    derive_levels,
    sequential_levels,
)
from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.domain.topology import preset


def shape(levels: tuple[CellLevel, ...]) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    return [(level.type, level.cells) for level in levels]


def test_a_dgx1_is_gpus_in_two_nvlink_quads_in_a_node() -> None:
    levels = derive_levels(8, preset("dgx1-v100"), "dgx1")
    assert [(level.type, level.size) for level in levels] == [
        ("dgx1-gpu", 1),
        ("dgx1-nvlink", 4),
        ("dgx1-node", 8),
    ]
    assert levels[1].cells == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_a_pcie_box_is_gpus_in_switch_pairs_in_a_node() -> None:
    levels = derive_levels(4, preset("pcie-4gpu"), "box")
    assert shape(levels)[1:] == [("box-pcie", ((0, 1), (2, 3))), ("box-node", ((0, 1, 2, 3),))]


def test_an_nvswitch_node_splits_by_socket_because_nvlink_spans_the_node() -> None:
    for name in ("dgx-a100", "dgx-h100"):
        levels = derive_levels(8, preset(name), name)
        assert [level.type for level in levels] == [f"{name}-gpu", f"{name}-socket", f"{name}-node"]


def test_without_a_topology_a_node_is_gpus_in_one_cell_and_one_gpu_is_one_level() -> None:
    assert [level.size for level in derive_levels(4, None, "n")] == [1, 4]
    assert shape(derive_levels(1, None, "n")) == [("n-node", ((0,),))]


def test_explicit_chains_group_consecutive_gpus() -> None:
    levels = sequential_levels([("v100", 1), ("pair", 2), ("node", 2)])
    assert shape(levels) == [
        ("v100", ((0,), (1,), (2,), (3,))),
        ("pair", ((0, 1), (2, 3))),
        ("node", ((0, 1, 2, 3),)),
    ]


def test_levels_must_nest_and_cover_every_gpu_once() -> None:
    gpu = CellLevel(type="g", cells=((0,), (1,), (2,), (3,)))
    node = CellLevel(type="n", cells=((0, 1, 2, 3),))
    NodeCells(levels=(gpu, node))
    crossing = CellLevel(type="x", cells=((0, 2), (1, 3)))
    pairs = CellLevel(type="p", cells=((0, 1), (2, 3)))
    NodeCells(levels=(gpu, crossing, node))  # any grouping, as long as it nests
    gpus8 = CellLevel(type="g", cells=tuple((i,) for i in range(8)))
    pairs8 = CellLevel(type="p", cells=((0, 1), (2, 3), (4, 5), (6, 7)))
    bad = CellLevel(type="q", cells=((0, 1, 2, 4), (3, 5, 6, 7)))
    node8 = CellLevel(type="n", cells=(tuple(range(8)),))
    with pytest.raises(InvalidInput, match="not a union of cells of the level below"):
        NodeCells(levels=(gpus8, pairs8, bad, node8))
    with pytest.raises(InvalidInput, match="same number of GPUs"):
        NodeCells(levels=(gpu, CellLevel(type="u", cells=((0,), (1, 2, 3))), node))
    with pytest.raises(InvalidInput, match=r"not each of 0\.\.3 once"):
        NodeCells(levels=(gpu, CellLevel(type="d", cells=((0, 1), (1, 2))), node))
    with pytest.raises(InvalidInput, match="repeat"):
        NodeCells(levels=(gpu, node), above=(("n", "rack-0"),))
    with pytest.raises(InvalidInput, match="one cell per GPU"):
        NodeCells(levels=(pairs, node))


def test_a_node_refuses_cells_that_are_not_its_gpus() -> None:
    cells = NodeCells(levels=derive_levels(4, None, "n"))
    Node(name="ok", capacity=Resources.of({"gpu": 4}), cells=cells)
    with pytest.raises(InvalidInput, match="its cells hold 4 GPUs but the node has 8"):
        Node(name="bad", capacity=Resources.of({"gpu": 8}), cells=cells)


def test_a_guarantee_is_at_least_one_cell() -> None:
    with pytest.raises(InvalidInput, match="use 1 or more"):
        CellGuarantee(type="dgx1-node", count=0)
