"""Cluster presets built from the public traces, and Cluster documents."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.sim.clusters import PRESETS, VC_LABEL, cluster_preset, load_cluster
from tests.unit.sim.traces.test_philly import VC_NODES

GIB = 2**30


@pytest.mark.traces
def test_philly_is_352_nodes_of_8_gpus_grouped_by_vc(traces_dir: Path) -> None:
    nodes = cluster_preset("philly", traces_dir=traces_dir)
    assert len(nodes) == 352
    assert sum(node.capacity.get("gpu") for node in nodes) == 2816
    per_vc = Counter(node.labels[VC_LABEL] for node in nodes)
    assert per_vc == Counter(VC_NODES)
    assert nodes[0].name == "6214e9-0" and nodes[-1].name == "0e4a51-31"
    assert len({node.name for node in nodes}) == 352
    tors = Counter(node.network["tor"] for node in nodes)
    assert len(tors) == 22 and set(tors.values()) == {16}
    first = nodes[0]
    assert first.capacity.get("cpu") == 64_000 and first.capacity.get("memory") == 512 * GIB
    assert len(first.gpus) == 8


@pytest.mark.traces
def test_openb_is_the_published_cluster(traces_dir: Path) -> None:
    nodes = cluster_preset("openb", traces_dir=traces_dir)
    assert len(nodes) == 1523
    assert sum(node.capacity.get("gpu") for node in nodes) == 6212
    assert sum(node.capacity.get("cpu") for node in nodes) == 125_514_000
    per_node = Counter(int(node.capacity.get("gpu")) for node in nodes)
    assert per_node == Counter({8: 617, 2: 518, 4: 54, 1: 24, 0: 310})
    gpus_per_model: Counter[str] = Counter()
    for node in nodes:
        if node.gpus:
            gpus_per_model[node.labels[GPU_MODEL_LABEL]] += len(node.gpus)
    assert gpus_per_model == Counter(
        {"G2": 4392, "T4": 842, "G3": 312, "P100": 265, "V100M32": 204, "V100M16": 195, "A10": 2}
    )
    assert all(GPU_MODEL_LABEL not in node.labels for node in nodes if not node.gpus)


@pytest.mark.traces
def test_tiresias_is_its_cluster_spec(traces_dir: Path) -> None:
    nodes = cluster_preset("tiresias", traces_dir=traces_dir)
    assert len(nodes) == 16 and sum(node.capacity.get("gpu") for node in nodes) == 64
    assert {node.network["tor"] for node in nodes} == {"switch-0"}


def test_built_in_presets_need_no_traces() -> None:
    kueue = cluster_preset("kueue")
    assert sum(node.capacity.get("cpu") for node in kueue) == 600_000
    pollux = cluster_preset("pollux")
    assert len(pollux) == 16 and sum(node.capacity.get("gpu") for node in pollux) == 64


def test_trace_presets_without_traces_dir_say_so() -> None:
    with pytest.raises(DocumentError, match="traces_dir"):
        cluster_preset("philly")


def test_an_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(DocumentError) as caught:
        cluster_preset("summit")
    assert all(name in str(caught.value) for name in PRESETS)
    with pytest.raises(DocumentError, match="neither a cluster preset nor a file"):
        load_cluster("summit")


def test_a_cluster_document_file(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(
        """\
apiVersion: phalanx/v1
kind: Queue
metadata: {name: nlp}
---
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: dgx
    count: 3
    resources: {cpu: 128, memory: 1Ti}
    gpus: {count: 8, model: A100}
"""
    )
    nodes = load_cluster(str(path))
    assert [node.name for node in nodes] == ["dgx-0", "dgx-1", "dgx-2"]
    assert load_cluster("kueue") == cluster_preset("kueue")
    twice = tmp_path / "twice.yaml"
    twice.write_text(path.read_text() + "---\n" + path.read_text().split("---\n", 1)[1])
    with pytest.raises(DocumentError, match="dgx-0, dgx-1, dgx-2 appear in two"):
        load_cluster(str(twice))
    queues_only = tmp_path / "queues.yaml"
    queues_only.write_text(path.read_text().split("---\n")[0])
    with pytest.raises(DocumentError, match="no Cluster document"):
        load_cluster(str(queues_only))
