"""Datasets for a workload whose trace has none: ``with_datasets``.

No public trace says which data its jobs read, so a replay with data gives each job
that reads none one of ``count`` datasets, drawn with Zipf-like popularity: the dataset
of rank ``r`` (0-based) is read by a share of the jobs proportional to ``1 / (r + 1)``
(exponent 1), as a few corpora are read by most jobs of a cluster and many by few.
Every role of such a job reads it (all its tasks read the training data).

Guarantees: the same workload, ``count``, ``size`` and ``seed`` give the same
assignment (drawn in workload order from a generator of its own); jobs that read
datasets already keep theirs; every dataset a job reads ends with a size: the
workload's own, else ``size``; the names are ``dataset-<rank>``, zero-padded so that
they sort by rank.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

import numpy as np

from phalanx.domain.errors import InvalidInput
from phalanx.sim.data.model import names_read
from phalanx.sim.workload import Dataset, Workload, WorkloadJob

#: The Zipf exponent of the datasets' popularity.
EXPONENT: Final = 1.0
#: Most datasets ``with_datasets`` makes.
MAX_DATASETS: Final = 100_000


def with_datasets(workload: Workload, *, count: int, size: int, seed: int) -> Workload:
    """``workload`` with each job that reads no dataset given one of ``count`` datasets
    of ``size`` bytes (none when ``count`` is 0), and every dataset read given a size."""
    if not 0 <= count <= MAX_DATASETS:
        raise InvalidInput(f"{count} datasets", field="datasets", fix=f"give 0 to {MAX_DATASETS:,}")
    jobs = workload.jobs
    added: tuple[Dataset, ...] = ()
    if count:
        names = [f"dataset-{rank:0{len(str(count - 1))}d}" for rank in range(count)]
        bare = [i for i, item in enumerate(jobs) if not names_read([item.job])]
        weights = 1.0 / np.arange(1, count + 1) ** EXPONENT
        ranks = np.random.default_rng(seed).choice(count, size=len(bare), p=weights / weights.sum())
        given = list(jobs)
        for index, rank in zip(bare, ranks, strict=True):
            given[index] = _reading(jobs[index], names[int(rank)])
        jobs = tuple(given)
        added = tuple(Dataset(name=name, size=size) for name in names)
    known = {dataset.name for dataset in (*workload.datasets, *added)}
    unsized = sorted(names_read(item.job for item in jobs) - known)
    sized = (*workload.datasets, *added, *(Dataset(name=name, size=size) for name in unsized))
    read = names_read(item.job for item in jobs)
    return replace(workload, jobs=jobs, datasets=tuple(d for d in sized if d.name in read))


def _reading(item: WorkloadJob, name: str) -> WorkloadJob:
    """``item`` with every role reading dataset ``name``."""
    roles = tuple(replace(role, datasets=((name, name),)) for role in item.job.roles)
    return replace(item, job=replace(item.job, roles=roles))
