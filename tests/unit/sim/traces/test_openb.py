"""The openb loader on the real pod lists, and on small bad files."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import SelectorOperator
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.sim.traces.openb import DEFAULT_DURATION, QUEUE, load_openb
from phalanx.sim.workload import Workload, WorkloadJob

CSV = Path("alibaba-gpu-v2023-openb/csv")
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


@pytest.fixture(scope="module")
def default(traces_dir: Path) -> Workload:
    return load_openb(traces_dir / CSV / "openb_pod_list_default.csv")


def _gpu(job: WorkloadJob) -> float:
    return job.job.roles[0].resources.get("gpu")


@pytest.mark.traces
def test_every_pod_is_a_one_task_job_in_queue_openb(default: Workload) -> None:
    assert len(default.jobs) == 8152
    assert [q.name for q in default.queues] == [QUEUE]
    assert all(job.job.queue == QUEUE and job.job.replicas == 1 for job in default.jobs)
    assert all(job.job.min_available == 1 for job in default.jobs)


@pytest.mark.traces
def test_gpu_requests_match_the_readme(default: Workload) -> None:
    whole = Counter(math.ceil(_gpu(job)) for job in default.jobs)
    assert whole == Counter({0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44})
    assert sum(1 for job in default.jobs if 0 < _gpu(job) < 1) == 3078
    assert sum(_gpu(job) for job in default.jobs) == pytest.approx(6086.8)
    assert "gpu-memory" not in default.jobs[0].job.roles[0].resources


@pytest.mark.traces
def test_cpu_and_memory_are_in_canonical_units(default: Workload) -> None:
    first = default.jobs[0].job  # openb-pod-0000,12000,16384,1,1000
    assert first.name == "openb-pod-0000"
    resources = first.roles[0].resources
    assert resources.get("cpu") == 12_000 and resources.get("memory") == 16_384 * 2**20
    assert resources.get("gpu") == 1.0


@pytest.mark.traces
def test_times_durations_and_priorities(default: Workload) -> None:
    assert default.jobs[0].submit_time == 0.0
    assert default.jobs[-1].submit_time == 12_901_761.0
    assert statistics.median(job.duration for job in default.jobs) == 540.0
    assert all(job.duration > 0 for job in default.jobs)
    # openb-pod-7285 is deleted the second it is created: no valid duration.
    (pod,) = (job for job in default.jobs if job.name == "openb-pod-7285")
    assert pod.duration == DEFAULT_DURATION
    priorities = Counter(job.job.priority for job in default.jobs)
    assert priorities == Counter({200: 4647 + 7, 100: 100, 0: 3398})


@pytest.mark.traces
def test_a_gpu_spec_becomes_a_node_affinity_on_the_gpu_model(traces_dir: Path) -> None:
    workload = load_openb(traces_dir / CSV / "openb_pod_list_gpuspec33.csv")
    constrained = [job for job in workload.jobs if job.job.roles[0].affinity]
    assert len(constrained) == 2388
    (pod,) = (job for job in constrained if job.name == "openb-pod-0009")
    (term,) = pod.job.roles[0].affinity
    assert term.key == GPU_MODEL_LABEL and term.operator is SelectorOperator.IN
    assert term.values == ("V100M16", "V100M32")
    assert term.matches({GPU_MODEL_LABEL: "V100M32"})
    assert not term.matches({GPU_MODEL_LABEL: "T4"})


@pytest.mark.traces
@pytest.mark.parametrize(("variant", "rows"), [("multigpu20", 8324), ("multigpu50", 9061)])
def test_untimed_variants_arrive_in_row_order(traces_dir: Path, variant: str, rows: int) -> None:
    workload = load_openb(
        traces_dir / CSV / f"openb_pod_list_{variant}.csv", default_duration=300.0
    )
    assert len(workload.jobs) == rows
    assert [job.submit_time for job in workload.jobs] == [float(i) for i in range(rows)]
    assert {job.duration for job in workload.jobs} == {300.0}
    assert any("row order" in note for note in workload.notes)


@pytest.mark.traces
@pytest.mark.parametrize(
    ("variant", "rows"),
    [("cpu0", 7064), ("cpu300", 10094), ("gpushare100", 8152), ("gpuspec05", 8152)],
)
def test_other_variants_load(traces_dir: Path, variant: str, rows: int) -> None:
    assert len(load_openb(traces_dir / CSV / f"openb_pod_list_{variant}.csv").jobs) == rows


def _write(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "pods.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_pods_without_a_valid_duration_run_the_default(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "p-0,1000,1024,0,0,,BE,Pending,10,,",
        "p-1,1000,1024,0,0,,BE,Failed,20,20,20",
        "p-2,1000,1024,1,250,T4|A10|T4,LS,Running,30,90,31",
    )
    workload = load_openb(path, default_duration=7.0)
    assert [(j.name, j.submit_time, j.duration) for j in workload.jobs] == [
        ("p-0", 10.0, 7.0),
        ("p-1", 20.0, 7.0),
        ("p-2", 30.0, 60.0),
    ]
    last = workload.jobs[2].job.roles[0]
    assert last.resources.get("gpu") == 0.25 and last.affinity[0].values == ("A10", "T4")


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("p-1,1000,1024,1,1000,,Gold,Running,0,5,0", "qos"),
        ("p-1,-1,1024,1,1000,,LS,Running,0,5,0", "cpu_milli"),
        ("p-1,1000,lots,1,1000,,LS,Running,0,5,0", "memory_mib"),
        ("p-1,1000,1024,1,0,,LS,Running,0,5,0", "gpu_milli"),
        ("p-1,1000,1024,0.5,1000,,LS,Running,0,5,0", "num_gpu"),
        ("p-1,1000,1024,1,1000,,LS,Running,,5,0", "creation_time"),
        ("p-1,1000,1024,1,1000,,LS,Running,0,later,0", "deletion_time"),
        ("p-0,1000,1024,1,1000,,LS,Running,0,5,0", "name"),
    ],
)
def test_a_bad_row_names_the_line_the_column_and_the_fix(
    tmp_path: Path, row: str, field: str
) -> None:
    path = _write(tmp_path, "p-0,1000,1024,1,1000,,LS,Running,0,5,0", row)
    with pytest.raises(DocumentError) as caught:
        load_openb(path)
    assert f"{path}, line 3: {field}:" in str(caught.value)
    assert "fix:" in str(caught.value)
