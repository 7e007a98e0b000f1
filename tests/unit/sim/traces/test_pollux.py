"""The Pollux workload loader: real workloads, durations from the app profiles."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces.pollux import QUEUE, load_pollux, profile_duration, read_profile

POLLUX = Path("philly-jobs-pollux")
FOLDERS = {
    "workloads": 160,
    "workloads-0.5": 80,
    "workloads-1.5": 240,
    "workloads-2.0": 320,
    "workloads-realistic": 160,
}


@pytest.mark.traces
@pytest.mark.parametrize(("folder", "jobs"), FOLDERS.items())
def test_every_workload_file_loads(traces_dir: Path, folder: str, jobs: int) -> None:
    for n in range(1, 9):
        path = traces_dir / POLLUX / folder / f"workload-{n}.csv"
        workload = load_pollux(path)
        assert len(workload.jobs) == jobs
        with path.open() as stream:
            rows = {row["name"]: row for row in csv.DictReader(stream)}
        for item in workload.jobs:
            row = rows[item.name]
            (role,) = item.job.roles
            assert item.job.queue == QUEUE
            assert item.submit_time == float(row["time"])
            assert role.replicas == int(row["num_replicas"]) == item.job.min_available
            assert dict(role.resources.items()) == {"gpu": 1.0}
            assert 0 < item.duration < 12 * 3600 or folder == "workloads-realistic"


@pytest.mark.traces
def test_the_duration_follows_pollux_fixed_configuration_estimate(traces_dir: Path) -> None:
    profiles = traces_dir / POLLUX / "app_profiles"
    cifar10 = read_profile(profiles / "cifar10")
    # 8 replicas at batch 2048: placement "44" (two 4-GPU nodes), local batch 256, one
    # step per iteration; 3178 iterations to epoch 100 (last row of validation-2048.csv).
    with (profiles / "cifar10" / "placements.csv").open() as stream:
        rows = [r for r in csv.DictReader(stream) if r["placement"] == "44"]
    xs = [float(r["local_bsz"]) for r in rows]
    step = float(np.interp(256, xs, [float(r["step_time"]) for r in rows]))
    assert profile_duration(cifar10, 8, 2048) == pytest.approx(3178 * step)
    # More replicas at the same batch size finish sooner; beyond the profile: None.
    fast, slow = profile_duration(cifar10, 16, 4096), profile_duration(cifar10, 6, 4096)
    assert fast is not None and slow is not None and fast < slow
    assert profile_duration(cifar10, 8, 10**6) is None  # no batch size that large
    assert profile_duration(cifar10, 20, 4096) is None  # 5 nodes: neither file has it
    assert profile_duration(cifar10, 5, 2048) is not None  # placement 41 is profiled as 14
    imagenet = read_profile(profiles / "imagenet")
    assert profile_duration(imagenet, 48, 6400) is not None  # from scalability.csv (12 nodes)


@pytest.mark.traces
def test_durations_override_the_profiles(traces_dir: Path) -> None:
    path = traces_dir / POLLUX / "workloads" / "workload-6.csv"
    workload = load_pollux(path, durations={"cifar10": 100.0})
    cifar = [job for job in workload.jobs if job.name.startswith("cifar10-")]
    assert cifar and {job.duration for job in cifar} == {100.0}
    assert any(job.duration != 100.0 for job in workload.jobs)


def _write(tmp_path: Path, *rows: str) -> Path:
    folder = tmp_path / "workloads"
    folder.mkdir(exist_ok=True)
    path = folder / "workload-1.csv"
    path.write_text("\n".join(["name,time,application,num_replicas,batch_size", *rows]) + "\n")
    return path


def test_an_application_without_profile_or_duration_is_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpt-0,5,gpt,4,64")
    with pytest.raises(DocumentError) as caught:
        load_pollux(path)
    assert f"{path}, line 2: application: no profile for 'gpt'" in str(caught.value)
    assert "durations=" in str(caught.value)
    workload = load_pollux(path, durations={"gpt": 900.0})
    (job,) = workload.jobs
    assert (job.name, job.submit_time, job.duration, job.job.replicas) == ("gpt-0", 5.0, 900.0, 4)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("b,-1,gpt,4,64", "time"),
        ("b,1,gpt,0,64", "num_replicas"),
        ("b,1,gpt,4,big", "batch_size"),
        ("a,1,gpt,4,64", "name"),
    ],
)
def test_a_bad_row_names_the_line_the_column_and_the_fix(
    tmp_path: Path, row: str, field: str
) -> None:
    path = _write(tmp_path, "a,0,gpt,1,64", row)
    with pytest.raises(DocumentError) as caught:
        load_pollux(path, durations={"gpt": 1.0})
    assert f"{path}, line 3: {field}:" in str(caught.value)
