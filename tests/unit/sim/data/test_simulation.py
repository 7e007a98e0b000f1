"""Datasets through a whole simulation: the engine sees what each node's cache holds
(``Node.datasets``) and places a reader there; the summary says what the data cost."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from phalanx.data.cache import CacheLimits
from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, Role
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import default_config
from phalanx.sim.data import CacheModel
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Dataset, Workload, WorkloadJob

GB = 10**9
NODES = [
    Node(name=f"n{i}", capacity=Resources.of({"cpu": 64_000, "memory": 512 * GB, "gpu": 8}))
    for i in range(4)
]
QUEUES = (Queue(name="default"),)


def _workload(*, sized: bool = True) -> Workload:
    """Three one-GPU jobs reading dataset d (100 GB), 500 s apart, 60 s of work each."""
    role = Role(name="w", replicas=1, resources=Resources.of({"gpu": 1}), datasets=(("d", None),))
    jobs = tuple(
        WorkloadJob(
            job=Job(name=f"j{i}", queue="default", roles=(role,), creation_time=500.0 * i),
            duration=60.0,
        )
        for i in range(3)
    )
    datasets = (Dataset(name="d", size=100 * GB),) if sized else ()
    return Workload(jobs=jobs, queues=QUEUES, datasets=datasets)


def _simulation(
    workload: Workload, on_event: Callable[[dict[str, object]], None] | None = None
) -> Simulation:
    model = CacheModel(limits=CacheLimits(quota=1000 * GB), bandwidth=1 * GB)
    options = SimOptions(data=model)
    return Simulation(NODES, workload, default_config(), options=options, on_event=on_event)


def test_later_readers_go_to_the_node_that_holds_their_data_and_start_warm() -> None:
    placed: list[str] = []

    def note(row: dict[str, object]) -> None:
        if row["ev"] == "Placed":
            placed.extend(str(task["node"]) for task in row["tasks"])  # type: ignore[attr-defined]

    simulation = _simulation(_workload(), note)
    metrics = simulation.run()
    assert len(placed) == 3 and len(set(placed)) == 1
    warm = next(n for n in simulation.state.snapshot.nodes if n.name == placed[0])
    assert warm.datasets == frozenset({"d"})  # the engine sees it, under its key
    summary = metrics.summary(sim_wall_s=0.0)
    assert summary["data_reads"] == 3
    assert summary["data_hit_rate"] == pytest.approx(2 / 3)
    assert summary["data_cold_bytes"] == 100 * GB
    jct = sorted(r.jct for r in metrics.jobs.values() if r.jct is not None)
    assert jct == [61.0, 61.0, 161.0]  # the first waits 100 s for its data; sessions 1 s late


def test_a_run_without_datasets_reports_no_data_figures() -> None:
    role = Role(name="w", replicas=1, resources=Resources.of({"gpu": 1}))
    job = WorkloadJob(job=Job(name="j", queue="default", roles=(role,)), duration=5.0)
    summary = _simulation(Workload(jobs=(job,), queues=QUEUES)).run().summary(sim_wall_s=0.0)
    assert not any(key.startswith("data_") for key in summary)


def test_a_dataset_read_without_a_size_is_refused() -> None:
    with pytest.raises(InvalidInput, match="datasets d have no size"):
        _simulation(_workload(sized=False))
