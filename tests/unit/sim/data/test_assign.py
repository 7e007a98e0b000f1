"""with_datasets: a seeded Zipf-like assignment, the same for the same seed; jobs that
read datasets keep theirs; every dataset read has a size."""

from __future__ import annotations

from collections import Counter

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, Role
from phalanx.domain.resources import Resources
from phalanx.sim.data import with_datasets
from phalanx.sim.workload import Dataset, Workload, WorkloadJob


def _workload(count: int = 2000, *, reading: dict[int, str] | None = None) -> Workload:
    jobs = []
    for i in range(count):
        datasets = ((reading[i], None),) if reading and i in reading else ()
        roles = tuple(
            Role(name=n, replicas=1, resources=Resources.of({"gpu": 1}), datasets=datasets)
            for n in ("master", "worker")
        )
        jobs.append(WorkloadJob(job=Job(name=f"j{i}", queue="q", roles=roles), duration=1.0))
    return Workload(jobs=tuple(jobs))


def _read(workload: Workload) -> list[tuple[tuple[str, str | None], ...]]:
    return [role.datasets for item in workload.jobs for role in item.job.roles]


def test_the_same_seed_gives_the_same_assignment_and_another_seed_another() -> None:
    first = with_datasets(_workload(), count=20, size=10, seed=3)
    assert _read(first) == _read(with_datasets(_workload(), count=20, size=10, seed=3))
    assert _read(first) != _read(with_datasets(_workload(), count=20, size=10, seed=4))


def test_every_role_of_a_job_reads_its_one_dataset_the_first_ranks_most() -> None:
    workload = with_datasets(_workload(), count=20, size=10, seed=0)
    for item in workload.jobs:
        master, worker = item.job.roles
        assert master.datasets == worker.datasets and len(master.datasets) == 1
    counts = Counter(item.job.roles[0].datasets[0][0] for item in workload.jobs)
    # rank r is read by a share 1 / (r + 1) / H_20 (H_20 = 3.6): 28% and 1.4% of 2000
    assert 480 < counts["dataset-00"] < 640 and counts["dataset-19"] < 60
    assert counts["dataset-00"] > counts["dataset-01"] > counts["dataset-04"]
    assert {d.name: d.size for d in workload.datasets} == dict.fromkeys(counts, 10)


def test_jobs_reading_datasets_keep_them_and_unsized_ones_take_the_size() -> None:
    given = _workload(4, reading={1: "wiki", 2: "imagenet"})
    sized = Workload(jobs=given.jobs, datasets=(Dataset(name="wiki", size=7),))
    workload = with_datasets(sized, count=0, size=99, seed=0)
    assert _read(workload) == _read(given)  # nothing assigned with count 0
    assert workload.datasets == (Dataset(name="wiki", size=7), Dataset(name="imagenet", size=99))
    assigned = with_datasets(sized, count=3, size=99, seed=0)
    assert [item.job.roles[0].datasets[0][0] for item in assigned.jobs][1:3] == [
        "wiki",
        "imagenet",
    ]


def test_a_count_out_of_range_is_refused_naming_the_option() -> None:
    with pytest.raises(InvalidInput, match="datasets"):
        with_datasets(_workload(1), count=10**9, size=1, seed=0)
