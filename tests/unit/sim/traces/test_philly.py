"""The Philly loader on the real job table, and on small bad files."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import JobPhase
from phalanx.sim.traces.philly import OTHER_QUEUE, load_philly, read_vcs
from phalanx.sim.workload import Workload

GIB = 2**30
PHILLY = Path("philly-jobs-pollux/philly.csv.gz")
# From philly-jobs-pollux/README.md.
GPU_DISTRIBUTION = {
    1: 76627,
    2: 1818,
    4: 1870,
    8: 1643,
    12: 7,
    16: 199,
    24: 7,
    32: 67,
    64: 6,
    128: 3,
}
JOBS_PER_VC = {
    "6214e9": 41226,
    "11cb48": 16091,
    "6c71a0": 9953,
    "b436b2": 7423,
    "103959": 1934,
    "ee9e8c": 1511,
    "0e4a51": 1435,
    "ed69ec": 1137,
    "7f04ca": 723,
    "2869ce": 422,
    "e13805": 374,
}
VC_NODES = {
    "6214e9": 64,
    "7f04ca": 32,
    "11cb48": 16,
    "b436b2": 64,
    "ee9e8c": 64,
    "e13805": 16,
    "6c71a0": 32,
    "2869ce": 16,
    "ed69ec": 8,
    "103959": 8,
    "0e4a51": 32,
}


@pytest.fixture(scope="module")
def philly(traces_dir: Path) -> Workload:
    return load_philly(traces_dir / PHILLY)


def _gpus(workload: Workload) -> Counter[int]:
    return Counter(
        int(sum(r.replicas * r.resources.get("gpu") for r in job.job.roles))
        for job in workload.jobs
    )


@pytest.mark.traces
def test_every_job_is_loaded_with_the_published_gpu_distribution(philly: Workload) -> None:
    assert len(philly.jobs) == 82_247
    assert _gpus(philly) == Counter(GPU_DISTRIBUTION)
    assert len({job.name for job in philly.jobs}) == 82_247
    assert all(job.job.phase is JobPhase.PENDING for job in philly.jobs)


@pytest.mark.traces
def test_jobs_land_in_their_vc_queue_and_the_small_vcs_in_philly_other(philly: Workload) -> None:
    per_queue = Counter(job.job.queue for job in philly.jobs)
    assert {vc: per_queue[vc] for vc in JOBS_PER_VC} == JOBS_PER_VC
    assert per_queue[OTHER_QUEUE] == 82_247 - sum(JOBS_PER_VC.values())
    assert 0 < per_queue[OTHER_QUEUE] < 4 * 10  # four VCs with < 10 jobs each
    assert all(job.job.user == job.job.queue for job in philly.jobs if job.job.queue in VC_NODES)


@pytest.mark.traces
def test_vc_queues_are_guaranteed_their_size_and_may_borrow(philly: Workload) -> None:
    queues = {queue.name: queue for queue in philly.queues}
    assert set(queues) == {*VC_NODES, OTHER_QUEUE}
    for vc, nodes in VC_NODES.items():
        queue = queues[vc]
        gpus = nodes * 8
        assert queue.guarantee.get("gpu") == gpus
        assert queue.guarantee.get("cpu") == gpus * 4000
        assert queue.guarantee.get("memory") == gpus * 32 * GIB
        assert queue.deserved == queue.guarantee
        assert queue.capability is None
    assert sum(q.guarantee.get("gpu") for q in philly.queues) == 2816
    assert queues[OTHER_QUEUE].guarantee.get("gpu") == 0


@pytest.mark.traces
def test_times_and_durations_match_the_readme(philly: Workload) -> None:
    span = datetime(2017, 12, 22, 8, 2, 11) - datetime(2017, 9, 4, 10, 30, 41)
    assert philly.jobs[0].submit_time == 0.0
    assert philly.jobs[-1].submit_time == span.total_seconds()
    keys = [(job.submit_time, job.name) for job in philly.jobs]
    assert keys == sorted(keys)
    durations = [job.duration for job in philly.jobs]
    assert min(durations) == 1.0 and max(durations) == 4_628_226.0
    assert statistics.median(durations) == 1144.0


@pytest.mark.traces
def test_a_job_is_one_gang_of_at_most_node_sized_tasks(philly: Workload) -> None:
    shapes = {}
    for item in philly.jobs:
        (role,) = item.job.roles
        assert item.job.min_available == role.replicas
        gpus = role.resources.get("gpu")
        assert role.resources.get("cpu") == 4000 * gpus
        assert role.resources.get("memory") == 32 * GIB * gpus
        shapes[int(role.replicas * gpus)] = (role.replicas, gpus)
    assert shapes[1] == (1, 1.0) and shapes[8] == (1, 8.0)
    assert shapes[12] == (2, 6.0) and shapes[24] == (3, 8.0) and shapes[128] == (16, 8.0)


@pytest.mark.traces
def test_until_and_limit_take_a_slice(traces_dir: Path, philly: Workload) -> None:
    day = load_philly(traces_dir / PHILLY, until=86_400.0)
    assert day.jobs == tuple(job for job in philly.jobs if job.submit_time < 86_400.0)
    first = load_philly(traces_dir / PHILLY, limit=100)
    assert first.jobs == philly.jobs[:100]
    assert first.queues == philly.queues


@pytest.mark.traces
def test_the_mapping_is_configurable(traces_dir: Path, tmp_path: Path) -> None:
    vc_file = tmp_path / "vcs.csv"
    vc_file.write_text("vc,node num\n6214e9,10\n")
    workload = load_philly(
        traces_dir / PHILLY,
        vc_file=vc_file,
        gpus_per_node=4,
        cpu_per_gpu="2",
        memory_per_gpu="16Gi",
        checkpoint_interval=600.0,
        limit=5000,
    )
    assert {q.name for q in workload.queues} == {"6214e9", OTHER_QUEUE}
    assert workload.queues[0].guarantee.get("gpu") == 40
    assert workload.queues[0].guarantee.get("cpu") == 80_000
    eight = next(job for job in workload.jobs if job.job.roles[0].resources.get("gpu") == 4)
    assert eight.job.roles[0].replicas >= 2
    assert eight.job.roles[0].resources.get("memory") == 64 * GIB
    assert all(job.checkpoint_interval == 600.0 for job in workload.jobs)


def _write(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "philly.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(rows) + "\n")
    vcs = tmp_path / "extra_from_HeliosArtifact"
    vcs.mkdir(exist_ok=True)
    (vcs / "philly_vc.csv").write_text("vc,node num\naaa,2\n")
    return path


def test_a_small_file_loads_with_times_from_the_earliest_row(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        ["2017-10-01 00:01:00,60,1,60,aaa", "2017-10-01 00:00:00,30,8,240,zzz"],
    )
    workload = load_philly(path)
    assert [(j.name, j.submit_time, j.job.queue) for j in workload.jobs] == [
        ("philly-1", 0.0, OTHER_QUEUE),
        ("philly-0", 60.0, "aaa"),
    ]
    assert workload.notes and "2017-10-01 00:00:00" in workload.notes[0]


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("yesterday,60,1,60,aaa", "timestamp"),
        ("2017-10-01 00:00:00,-5,1,60,aaa", "duration"),
        ("2017-10-01 00:00:00,soon,1,60,aaa", "duration"),
        ("2017-10-01 00:00:00,60,two,60,aaa", "num_gpus"),
        ("2017-10-01 00:00:00,60,0,60,aaa", "num_gpus"),
        ("2017-10-01 00:00:00,60,1.5,60,aaa", "num_gpus"),
        ("2017-10-01 00:00:00,60,1,60, ", "cluster"),
    ],
)
def test_a_bad_row_names_the_line_the_column_and_the_fix(
    tmp_path: Path, row: str, field: str
) -> None:
    path = _write(tmp_path, ["2017-10-01 00:00:00,60,1,60,aaa", row])
    with pytest.raises(DocumentError) as caught:
        load_philly(path)
    message = str(caught.value)
    assert f"{path}, line 3: {field}:" in message and "fix:" in message
    assert caught.value.field == field


def test_a_missing_column_or_vc_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    path.write_text("timestamp,duration,cluster\n2017-10-01 00:00:00,60,aaa\n")
    with pytest.raises(DocumentError, match=r"line 1: header: missing column\(s\) num_gpus"):
        load_philly(path)
    path = _write(tmp_path, ["2017-10-01 00:00:00,60,1,60,aaa"])
    with pytest.raises(DocumentError, match="cannot read"):
        load_philly(path, vc_file=tmp_path / "nope.csv")
    bad_vcs = tmp_path / "vcs.csv"
    bad_vcs.write_text("vc,node num\naaa,2\naaa,3\n")
    with pytest.raises(DocumentError, match="line 3: vc: 'aaa' is empty or repeated"):
        read_vcs(bad_vcs)
