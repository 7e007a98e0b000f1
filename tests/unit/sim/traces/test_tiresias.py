"""The Tiresias loader: the 60-job sample and the cluster specs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces.tiresias import QUEUE, load_tiresias, tiresias_nodes

SAMPLE = Path("tiresias-sample")


@pytest.mark.traces
def test_the_sample_has_60_jobs_with_the_published_sizes(traces_dir: Path) -> None:
    workload = load_tiresias(traces_dir / SAMPLE / "60_job.csv")
    assert len(workload.jobs) == 60
    assert [q.name for q in workload.queues] == [QUEUE]
    sizes = Counter(
        int(job.job.replicas * job.job.roles[0].resources.get("gpu")) for job in workload.jobs
    )
    assert sizes == Counter({1: 30, 2: 10, 4: 10, 8: 10})
    first = workload.jobs[0]  # 0,1,0,606,vgg19,164,30
    assert (first.name, first.submit_time, first.duration) == ("tiresias-0", 0.0, 164.0)
    eight = next(job for job in workload.jobs if job.name == "tiresias-1")  # 8 GPUs
    assert (eight.job.roles[0].replicas, eight.job.roles[0].resources.get("gpu")) == (2, 4.0)
    assert eight.job.min_available == 2


@pytest.mark.traces
@pytest.mark.parametrize(
    ("spec", "nodes", "gpus", "switches"),
    [
        ("cluster_spec.csv", 16, 64, 1),
        ("n1g4.csv", 1, 4, 1),
        ("n32g4.csv", 32, 128, 1),
        ("n160g8.csv", 160, 1280, 5),
        ("n256g8.csv", 256, 2048, 8),
    ],
)
def test_cluster_specs_become_nodes_under_their_switches(
    traces_dir: Path, spec: str, nodes: int, gpus: int, switches: int
) -> None:
    built = tiresias_nodes(traces_dir / SAMPLE / spec)
    assert len(built) == nodes
    assert sum(node.capacity.get("gpu") for node in built) == gpus
    assert len({node.network["tor"] for node in built}) == switches
    assert len({node.name for node in built}) == nodes
    assert all(len(node.gpus) == node.capacity.get("gpu") for node in built)


def test_a_spec_row_reads_cpu_as_cores_and_memory_as_gb(tmp_path: Path) -> None:
    path = tmp_path / "spec.csv"
    path.write_text(
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n2,3,4,16,64\n"
    )
    nodes = tiresias_nodes(path)
    assert [node.network["tor"] for node in nodes] == ["switch-0"] * 3 + ["switch-1"] * 3
    assert nodes[0].capacity.get("cpu") == 16_000 and nodes[0].capacity.get("memory") == 64e9


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("1,0,5,10,m,60,0", "num_gpu"),
        ("1,1,-5,10,m,60,0", "submit_time"),
        ("0,1,5,10,m,60,0", "job_id"),
        ("2,1,5,10,m,0,0", "duration"),
    ],
)
def test_a_bad_row_names_the_line_and_the_column(tmp_path: Path, row: str, field: str) -> None:
    path = tmp_path / "jobs.csv"
    header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"
    path.write_text(f"{header}\n0,1,0,10,m,60,0\n{row}\n")
    with pytest.raises(DocumentError) as caught:
        load_tiresias(path)
    assert f"{path}, line 3: {field}:" in str(caught.value) and "fix:" in str(caught.value)
