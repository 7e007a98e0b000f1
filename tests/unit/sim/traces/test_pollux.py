"""The Pollux workload loader: real workloads, durations from Pollux's job model."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces.pollux import (
    QUEUE,
    BatchConfig,
    batch_config,
    load_pollux,
    profile_duration,
    read_profile,
)

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
            assert role.replicas == int(row["num_replicas"]) == item.job.gang_size or (
                role.elastic is not None and item.job.gang_size == 1
            )
            assert role.elastic is not None and item.elastic is not None
            assert role.elastic.min_replicas == 1 <= role.replicas <= role.elastic.max_replicas
            assert item.elastic.profile.name == row["application"]
            assert dict(role.resources.items()) == {"gpu": 1.0}
            assert 0 < item.duration < 12 * 3600 or folder == "workloads-realistic"


def _toy_profile(root: Path) -> Path:
    """A two-epoch application profiled at batch sizes 8 and 32, small enough to work out
    by hand (see the tests below)."""
    folder = root / "toy"
    folder.mkdir()
    (folder / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n"
        "1,8,0.5,0.1\n1,16,0.9,0.1\n4,8,0.6,0.2\n4,16,1.0,0.2\n"
    )
    (folder / "scalability.csv").write_text(
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,8,4,0.7,0.3\n2,8,8,0.8,0.3\n"
    )
    header = "progress,iteration,metric,grad_sqr,grad_var\n"
    (folder / "validation-8.csv").write_text(header + "100,10,1,1,3\n250,20,2,1,1\n")
    (folder / "validation-32.csv").write_text(header + "110,3,1,1,6\n240,6,2,1,4\n")
    return folder


def test_the_duration_integrates_pollux_progress_model_by_hand(tmp_path: Path) -> None:
    toy = read_profile(_toy_profile(tmp_path))
    # Epochs end at the least progress over the batch sizes: 100 and 240, so epoch 0
    # needs 100 and epoch 1 140. The unit of progress is batch 8 (the smallest).
    assert (toy.epochs, toy.init_batch, toy.max_batch) == (2, 8, 32)
    assert list(toy.progress) == [100.0, 240.0]
    # 4 replicas at 32: placement "4", local batch 8, one step of 0.6 s per iteration.
    # Gain at 32 (scale 4): epoch 0 (6 + 1) / (6 / 4 + 1) = 2.8, epoch 1 5 / 2 = 2.5.
    assert batch_config(toy, 4, 32) == BatchConfig(replicas=4, atomic=8, accumulation=0)
    assert profile_duration(toy, 4, 32) == pytest.approx(100 * 0.6 / 2.8 + 140 * 0.6 / 2.5)
    # 1 replica at 16 (above the smallest batch): two accumulation steps of 8,
    # 0.5 + (0.5 - 0.1) = 0.9 s per iteration. Gain at 16, a third of the way from 8 to
    # 32: var 4 then 2, sqr 1, scale 2: 5 / 3 then 3 / 2.
    assert batch_config(toy, 1, 16) == BatchConfig(replicas=1, atomic=8, accumulation=1)
    assert profile_duration(toy, 1, 16) == pytest.approx(100 * 0.9 / (5 / 3) + 140 * 0.9 / 1.5)
    # 8 replicas: placement "44" is not profiled; scalability.csv's 2 nodes x 8 replicas
    # at local batch 4 is 0.7 s; gains as for 4 replicas.
    assert profile_duration(toy, 8, 32) == pytest.approx(100 * 0.7 / 2.8 + 140 * 0.7 / 2.5)
    # A batch above the largest profiled one is capped to it, as Pollux's job does.
    assert batch_config(toy, 4, 64).batch == 32
    # Not covered: 2 replicas (neither file), a local batch below the profiled ones.
    assert profile_duration(toy, 2, 16) is None
    assert profile_duration(toy, 4, 16) is None


def test_the_loader_resumes_jobs_and_charges_the_restart_delay(tmp_path: Path) -> None:
    (tmp_path / "app_profiles").mkdir()
    _toy_profile(tmp_path / "app_profiles")
    path = _write(tmp_path, "toy-0,0,toy,4,32")
    (job,) = load_pollux(path).jobs
    assert job.duration == pytest.approx(100 * 0.6 / 2.8 + 140 * 0.6 / 2.5)
    assert (job.checkpoint_interval, job.restart_delay) == (1.0, 30.0)
    (job,) = load_pollux(path, restart_delay=0.0).jobs
    assert job.restart_delay == 0.0


@pytest.mark.traces
def test_the_duration_is_pollux_job_model_on_the_real_profiles(traces_dir: Path) -> None:
    profiles = traces_dir / POLLUX / "app_profiles"
    bert = read_profile(profiles / "bert")
    # bert, 8 replicas at 384 (bert-4 of workload-6): placement "44", local batch 48 in
    # 4 steps of 12 (the largest profiled local batch); placements.csv row "44,12": step
    # 2.538950562477112 s, sync 1.6628430938720702 s.
    step, sync = 2.538950562477112, 1.6628430938720702
    iteration = step + 3 * (step - sync)
    # Epochs end at progress 7387 and 14774 (validation-12.csv, the least); gains from
    # validation-384.csv's gradient statistics at scale 384 / 12 = 32.
    gains = [
        (var + sqr) / (var / 32 + sqr)
        for sqr, var in (
            (6509198881259.403, 6086044601707605.0),
            (43032304393.29889, 45868579275033.31),
        )
    ]
    by_hand = 7387 * iteration / gains[0] + (14774 - 7387) * iteration / gains[1]
    assert profile_duration(bert, 8, 384) == pytest.approx(by_hand)
    # Pollux's simulator (Job.step, rounding to whole seconds off) on workload-6's jobs alone:
    pollux = {
        ("bert", 8, 384): 2459.830695218508,
        ("cifar10", 6, 2048): 897.2982477100599,
        ("imagenet", 24, 3200): 31805.308190906282,  # scalability.csv: 6 nodes x 24
        ("ncf", 1, 32768): 45.93535232720877,
        ("yolov3", 4, 64): 14100.018895538238,
        ("deepspeech2", 8, 320): 3517.6288004934677,
    }
    for (app, replicas, batch), seconds in pollux.items():
        found = profile_duration(read_profile(profiles / app), replicas, batch)
        assert found == pytest.approx(seconds, rel=1e-9), app


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
