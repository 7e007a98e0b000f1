"""The seeded synthetic generator."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces.synthetic import SyntheticParams, load_params, synthetic_workload


def test_the_same_seed_gives_the_same_workload() -> None:
    params = SyntheticParams(jobs=300)
    assert synthetic_workload(params, seed=7) == synthetic_workload(params, seed=7)
    assert synthetic_workload(params, seed=7) != synthetic_workload(params, seed=8)


def test_jobs_follow_the_mixes() -> None:
    params = SyntheticParams(
        jobs=4000,
        rate=0.5,
        sizes={1: 3.0, 16: 1.0},
        durations={60.0: 1.0, 600.0: 1.0},
        users={"ann": 1.0, "bob": 1.0},
        queues={"nlp": 1.0, "cv": 3.0},
        priorities={0: 1.0, 100: 1.0},
    )
    workload = synthetic_workload(params, seed=1)
    assert len(workload.jobs) == 4000
    assert [q.name for q in workload.queues] == ["cv", "nlp"]
    gpus = Counter(
        int(job.job.replicas * job.job.roles[0].resources.get("gpu")) for job in workload.jobs
    )
    assert set(gpus) == {1, 16} and 0.7 < gpus[1] / 4000 < 0.8
    assert {job.duration for job in workload.jobs} == {60.0, 600.0}
    assert {job.job.user for job in workload.jobs} == {"ann", "bob"}
    queues = Counter(job.job.queue for job in workload.jobs)
    assert 0.7 < queues["cv"] / 4000 < 0.8
    big = next(job.job for job in workload.jobs if job.job.replicas > 1)
    assert (big.replicas, big.roles[0].resources.get("gpu"), big.min_available) == (2, 8.0, 2)
    assert big.roles[0].resources.get("cpu") == 32_000
    mean_gap = workload.jobs[-1].submit_time / 4000
    assert 1.8 < mean_gap < 2.2  # 1 / rate
    assert [job.name for job in workload.jobs[:3]] == ["syn-0", "syn-1", "syn-2"]


def test_lognormal_durations_are_at_least_one_second_and_centred_on_the_median() -> None:
    workload = synthetic_workload(
        SyntheticParams(jobs=2001, duration_median=600.0, duration_sigma=2.0), seed=3
    )
    durations = sorted(job.duration for job in workload.jobs)
    assert durations[0] >= 1.0
    assert 450 < durations[1000] < 800


def test_params_load_from_yaml_or_json_and_unknown_fields_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(
        "jobs: 10\nrate: 0.1\nsizes: {1: 1, 8: 1}\nqueues: {a: 1}\ndurationMedian: 60\n"
    )
    params = load_params(path)
    assert (params.jobs, params.sizes, params.duration_median) == (10, {1: 1.0, 8: 1.0}, 60.0)
    json_path = tmp_path / "params.json"
    json_path.write_text('{"jobs": 5, "sizes": {"2": 1}}')
    assert load_params(json_path).sizes == {2: 1.0}
    (tmp_path / "empty.yaml").write_text("")
    assert load_params(tmp_path / "empty.yaml") == SyntheticParams()
    path.write_text("jobz: 10\n")
    with pytest.raises(DocumentError, match=r"jobz: unknown field.*did you mean 'jobs'"):
        load_params(path)
    path.write_text("rate: -1\n")
    with pytest.raises(DocumentError, match="rate: must be > 0"):
        load_params(path)
    path.write_text("sizes: {}\n")
    with pytest.raises(DocumentError, match="sizes: is empty"):
        load_params(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(DocumentError, match="expected a mapping"):
        load_params(path)


def test_until_drops_later_arrivals() -> None:
    workload = synthetic_workload(SyntheticParams(jobs=500, rate=1.0), seed=2, until=100.0)
    assert workload.jobs and all(job.submit_time < 100.0 for job in workload.jobs)
    assert len(workload.jobs) < 500
