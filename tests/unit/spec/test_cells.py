"""Cell types in Cluster documents and cell guarantees in Queue documents."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.errors import DocumentError
from phalanx.spec import load_documents
from phalanx.spec.cluster import ClusterDocument
from phalanx.spec.queue import QueueDocument

CLUSTER = """\
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
    resources: {cpu: 64}
    gpus: {count: 8, topology: dgx1-v100}
  - name: box
    count: 1
    resources: {cpu: 8}
    gpus: {count: 4, topology: pcie-4gpu}
  - name: cpu
    count: 1
    resources: {cpu: 8}
"""


def cluster(text: str = CLUSTER) -> ClusterDocument:
    (document,) = load_documents(textwrap.dedent(text))
    assert isinstance(document, ClusterDocument)
    return document


def refused(text: str) -> str:
    with pytest.raises(DocumentError) as caught:
        load_documents(text)
    return str(caught.value)


def test_explicit_cell_types_give_in_node_cells_and_racks_of_consecutive_nodes() -> None:
    nodes = {node.name: node for node in cluster().nodes()}
    dgx2 = nodes["dgx-2"].cells
    assert dgx2 is not None
    assert [(level.type, level.size) for level in dgx2.levels] == [
        ("v100", 1),
        ("v100-quad", 4),
        ("dgx1-node", 8),
    ]
    assert dgx2.above == (("dgx1-rack", "dgx/dgx1-rack-1"),)
    box = nodes["box-0"].cells
    assert box is not None and box.node_type == "pcie-4gpu-node"  # derived from its preset
    assert nodes["cpu-0"].cells is None


def test_a_group_without_a_preset_names_its_derived_cells_after_itself() -> None:
    text = CLUSTER.replace("gpus: {count: 4, topology: pcie-4gpu}", "gpus: {count: 4}")
    box = {node.name: node for node in cluster(text).nodes()}["box-0"].cells
    assert box is not None and [level.type for level in box.levels] == ["box-gpu", "box-node"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "cellType: dgx1-rack",
            "cellType: dgx1-pod",
            "spec.nodeGroups[0].cellType: cell type 'dgx1-pod' is not in spec.cellTypes; "
            "fix: name one of them (dgx1-node, dgx1-rack, v100-quad) or add it",
        ),
        (
            "count: 4\n    cellType",
            "count: 3\n    cellType",
            "a dgx1-rack cell spans 2 nodes, which does not divide count 3; fix: use a count "
            "that is a multiple of 2",
        ),
        (
            "childCellNumber: 2, isNodeLevel: true",
            "childCellNumber: 4, isNodeLevel: true",
            "a dgx1-node cell holds 16 GPUs but the nodes have 8",
        ),
        (
            "childCellNumber: 2, isNodeLevel: true}",
            "childCellNumber: 2}",
            "the chain under 'dgx1-rack' has no node level; fix: flag the type that is one "
            "node with isNodeLevel: true",
        ),
        (
            "- {name: dgx1-rack, childCellType: dgx1-node",
            "- {name: dgx1-rack, childCellType: v100-quad",
            "spec.cellTypes[2].childCellType: 'v100-quad' is the child of both 'dgx1-node' "
            "and 'dgx1-rack'",
        ),
        (
            "- {name: v100-quad, childCellType: v100,",
            "- {name: v100-quad, childCellType: dgx1-rack,",
            "contains itself",
        ),
        (
            "- {name: dgx1-rack, childCellType: dgx1-node, childCellNumber: 2}",
            "- {name: dgx1-rack, childCellType: dgx1-node, childCellNumber: 2, nodeLevel: true}",
            "spec.cellTypes[2].nodeLevel: unknown field; fix: did you mean 'isNodeLevel'?",
        ),
        (
            "childCellNumber: 4}",
            "childCellNumber: 1}",
            "spec.cellTypes[0].childCellNumber: must be >= 2",
        ),
        (
            "  - name: cpu\n    count: 1\n",
            "  - name: cpu\n    count: 1\n    cellType: dgx1-rack\n",
            "spec.nodeGroups[2].cellType: cells are made of GPUs but the group has no gpus",
        ),
    ],
)
def test_bad_cell_types_are_refused_naming_the_field_and_the_fix(
    old: str, new: str, expected: str
) -> None:
    assert old in CLUSTER, old
    assert expected in refused(CLUSTER.replace(old, new, 1))


QUEUE = """\
apiVersion: phalanx/v1
kind: Queue
metadata: {name: vc-a}
spec:
  cells: [{type: dgx1-node, count: 2}, {type: v100-quad, count: 1}]
"""


def test_a_queue_with_cells_is_a_virtual_cluster() -> None:
    (document,) = load_documents(QUEUE)
    assert isinstance(document, QueueDocument)
    assert document.to_domain().cells == (
        CellGuarantee(type="dgx1-node", count=2),
        CellGuarantee(type="v100-quad", count=1),
    )


def test_bad_cell_guarantees_are_refused() -> None:
    twice = QUEUE.replace("v100-quad, count: 1", "dgx1-node, count: 1")
    assert "spec.cells[1].type: cell type 'dgx1-node' is listed twice" in refused(twice)
    assert "spec.cells[0].count: must be >= 1" in refused(QUEUE.replace("count: 2", "count: 0"))
    assert "spec.cells[0].number: unknown field; fix: allowed: type, count" in refused(
        QUEUE.replace("count: 2", "number: 2")
    )
