"""``nvidia-smi topo -m`` parsing on recorded outputs, and the Cluster's ``gpus.topology``."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.domain.topology import NODE, PIX, PXB, SYS, nvlink, preset
from phalanx.spec import ClusterDocument, load_documents
from phalanx.spec.topology import MAX_TOPOLOGY_TEXT, parse_nvidia_smi_topo
from tests.unit.spec.topology_fixtures import DGX_A100, HGX_H20, PCIE_4GPU, V100_SXM2_CUBE_MESH


def test_dgx1_v100_recording_matches_the_preset_matrix() -> None:
    topology = parse_nvidia_smi_topo(V100_SXM2_CUBE_MESH)
    assert topology.links == preset("dgx1-v100").links
    # no NUMA Affinity column: the two CPU affinities become NUMA nodes 0 and 1
    assert topology.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert [nic.name for nic in topology.nics] == ["mlx5_0"]
    assert topology.nics[0].links == (NODE, NODE, PIX, PIX, SYS, SYS, SYS, SYS)
    assert topology.nvlink_peers(0) == (1, 2, 3, 4)
    assert topology.link(0, 3) == nvlink(2)


def test_dgx_a100_recording_matches_the_preset() -> None:
    topology = parse_nvidia_smi_topo(DGX_A100)
    dgx = preset("dgx-a100")
    assert topology.links == dgx.links
    assert topology.numa == (3, 3, 1, 1, 7, 7, 5, 5)  # NPS4; the preset names sockets
    assert [nic.name for nic in topology.nics] == [f"mlx5_{i}" for i in range(10)]
    assert topology.nics[:8] == dgx.nics  # the preset leaves out the storage NICs
    assert topology.nics[8].links == (SYS,) * 8
    assert [topology.nearest_nic(gpu) for gpu in range(8)] == [0, 0, 2, 2, 4, 4, 6, 6]
    assert topology.nics[0].links[1] == PXB


def test_hgx_h100_board_recording_matches_the_preset() -> None:
    topology = parse_nvidia_smi_topo(HGX_H20)
    h100 = preset("dgx-h100")
    assert topology.links == h100.links
    assert topology.numa == h100.numa
    # NIC names come from the NIC legend; the links are the preset's
    assert [nic.name for nic in topology.nics] == [f"mlx5_{i}" for i in range(1, 9)]
    assert [nic.links for nic in topology.nics] == [nic.links for nic in h100.nics]
    assert [topology.nearest_nic(gpu) for gpu in range(8)] == list(range(8))


def test_pcie_recording_matches_the_preset_matrix() -> None:
    topology = parse_nvidia_smi_topo(PCIE_4GPU)
    assert topology.links == preset("pcie-4gpu").links
    assert topology.numa == (3, 3, 4, 4)
    assert topology.nvlink_peers(0) == ()
    assert dict(topology.numa_domains()) == {3: (0, 1), 4: (2, 3)}


def test_tabs_blank_cpu_affinity_and_old_tokens() -> None:
    # nvidia-smi prints tabs and " X "; older drivers wrote SOC for SYS
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSOC\t\t0\nGPU1\tSOC\t X \t8-15\t1\n"
    )
    topology = parse_nvidia_smi_topo(text)
    assert topology.link(0, 1) == SYS
    assert topology.numa == (0, 1)


def test_na_numa_falls_back_to_cpu_affinity() -> None:
    text = "GPU0 GPU1 GPU2 CPU Affinity NUMA Affinity\nGPU0 X PHB SYS 0-7 N/A\n"
    text += "GPU1 PHB X SYS 0-7 N/A\nGPU2 SYS SYS X 8-15 N/A\n"
    assert parse_nvidia_smi_topo(text).numa == (0, 0, 1)


def _broken(old: str, new: str, text: str = PCIE_4GPU) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no header row starting with GPU0 found"),
        ("Legend:\n  X = Self\n", "no header row"),
        (
            _broken("GPU0     X      PIX", "GPU0     X      PIZ"),
            "line 2 (row GPU0), column GPU1: 'PIZ' is not a link; fix: write X, NV<count>",
        ),
        (
            _broken("GPU1    PIX      X      SYS     SYS     SYS", "GPU1    PIX      X      SYS"),
            "line 3 (row GPU1), column GPU3: '48-63' is not a link",
        ),
        (
            _broken(
                "GPU3    SYS     SYS     PIX      X      SYS     64-79   4               N/A\n", ""
            ),
            "row GPU3: 3 GPU rows for 4 GPU columns",
        ),
        (
            _broken("GPU1    PIX      X ", "GPU1    SYS      X "),
            "nvidia-smi matrix[GPU1][GPU0]: SYS but GPU0 -> GPU1 is PIX; fix: links are symmetric",
        ),
        (
            _broken("GPU0     X      PIX", "GPU0    PIX      X "),
            "nvidia-smi matrix[GPU0][GPU0]: PIX found; fix: write X here",
        ),
        (
            _broken("GPU1    PIX", "GPU2    PIX"),
            "line 3 (row GPU2): row GPU2 found where row GPU1 was expected",
        ),
        (_broken("GPU0    GPU1", "GPU1    GPU0"), "no header row starting with GPU0"),
        (
            _broken("3               N/A\nGPU1", "x               N/A\nGPU1"),
            "row GPU0: NUMA Affinity 'x' is not a NUMA node",
        ),
        (_broken("NIC0    SYS", "CPU0    SYS"), "line 6: unexpected row 'CPU0'"),
        ("x" * (MAX_TOPOLOGY_TEXT + 1), "is more than 200000"),
    ],
)
def test_malformed_output_is_refused_with_row_column_and_fix(text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_nvidia_smi_topo(text)
    assert message in str(caught.value)
    assert caught.value.fix


def _cluster(topology: str, *, count: int = 8) -> str:
    return (
        textwrap.dedent(
            """\
        apiVersion: phalanx/v1
        kind: Cluster
        metadata: {name: lab}
        spec:
          nodeGroups:
          - name: dgx
            count: 2
            resources: {cpu: 64}
            gpus:
              count: COUNT
              topology: TOPOLOGY
        """
        )
        .replace("COUNT", str(count))
        .replace("TOPOLOGY", topology)
    )


def _nodes(text: str) -> ClusterDocument:
    (document,) = load_documents(text)
    assert isinstance(document, ClusterDocument)
    return document


def test_preset_name_sets_topology_gpus_and_label() -> None:
    first, second = _nodes(_cluster("dgx1-v100")).nodes()
    topology = preset("dgx1-v100")
    assert first.gpu_topology == topology and second.gpu_topology is first.gpu_topology
    assert first.labels["phalanx.io/gpu-topology"] == "dgx1-v100"
    gpu5 = first.gpus[5]
    assert (gpu5.numa, gpu5.nvlink_peers, gpu5.nic) == (1, (1, 4, 6, 7), "mlx5_2")


def test_unknown_preset_suggests_the_closest() -> None:
    with pytest.raises(DocumentError) as caught:
        load_documents(_cluster("dgx-a10"))
    message = str(caught.value)
    assert "spec.nodeGroups[0].gpus.topology: unknown GPU topology preset 'dgx-a10'" in message
    assert "did you mean 'dgx-a100'?" in message
    assert "dgx-a100, dgx-h100, dgx1-v100, pcie-4gpu" in message


def test_explicit_matrix_form() -> None:
    topology = (
        "{matrix: ['X NV1 SYS SYS', 'NV1 X SYS SYS', 'SYS SYS X NV4', 'SYS SYS NV4 X'],"
        " numa: [0, 0, 1, 1], nics: {ib0: PIX PIX SYS SYS, ib1: SYS SYS PIX PIX}}"
    )
    (node, _) = _nodes(_cluster(topology, count=4)).nodes()
    assert node.labels["phalanx.io/gpu-topology"] == "custom"
    assert node.gpu_topology is not None
    assert node.gpu_topology.link(2, 3) == nvlink(4)
    assert [gpu.nic for gpu in node.gpus] == ["ib0", "ib0", "ib1", "ib1"]
    assert [gpu.nvlink_peers for gpu in node.gpus] == [(1,), (0,), (3,), (2,)]


def test_nvidia_smi_text_form() -> None:
    block = "|2\n" + textwrap.indent(PCIE_4GPU, " " * 8)  # 2: the first line starts with spaces
    (node, _) = _nodes(_cluster(block, count=4)).nodes()
    assert node.gpu_topology == parse_nvidia_smi_topo(PCIE_4GPU)
    assert [gpu.numa for gpu in node.gpus] == [3, 3, 4, 4]
    assert node.labels["phalanx.io/gpu-topology"] == "custom"


@pytest.mark.parametrize(
    ("topology", "count", "message"),
    [
        ("pcie-4gpu", 8, "gpus.topology: the topology describes 4 GPUs but count is 8"),
        (
            "{matrix: ['X NV1', 'NV2 X']}",
            2,
            "gpus.topology.matrix[1]: NV2 but GPU0 -> GPU1 is NV1",
        ),
        ("{matrix: ['X PIX', 'PIX X'], nics: {ib0: PIX}}", 2, "gpus.topology.nics.ib0: 1 links"),
        (
            "{matrix: ['X PIX', 'PIX X'], nics: {'ib0,ib1': PIX PIX}}",
            2,
            "gpus.topology.nics: 'ib0,ib1' cannot name a NIC",
        ),
        ("{matrix: ['X PIX', 'PIX X'], numa: [0]}", 2, "gpus.topology.numa: 1 NUMA nodes"),
        ("{matrix: ['X PIX', 'PIX X'], numa: [0, -1]}", 2, "gpus.topology.numa[1]: must be >= 0"),
        ("{matrix: ['X QPI', 'QPI X']}", 2, "gpus.topology.matrix[0]: 'QPI' is not a link"),
        ("{matrix: ['X PIX', 'PIX X'], nvlink: 2}", 2, "gpus.topology.nvlink: unknown field"),
    ],
)
def test_bad_topology_names_the_field(topology: str, count: int, message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        load_documents(_cluster(topology, count=count))
    assert f"spec.nodeGroups[0].{message}" in str(caught.value)
