"""Kueue's scheduler benchmark as a workload (built in; no trace files)."""

from __future__ import annotations

from collections import Counter

from phalanx.domain.queue import ROOT_QUEUE
from phalanx.domain.resources import Resources
from phalanx.sim.traces.kueue import kueue_nodes, kueue_queues, kueue_workload


def _cpu(cores: float) -> Resources:
    return Resources.of({"cpu": cores * 1000})


def test_15000_jobs_in_30_queues_of_5_cohorts() -> None:
    workload = kueue_workload()
    assert len(workload.jobs) == 15_000
    per_queue = Counter(job.job.queue for job in workload.jobs)
    assert len(per_queue) == 30 and set(per_queue.values()) == {500}
    parents = Counter(q.parent for q in workload.queues if q.parent != ROOT_QUEUE)
    assert parents == Counter({f"cohort-{c}": 6 for c in range(5)})
    assert len({job.name for job in workload.jobs}) == 15_000


def test_classes_have_the_published_size_runtime_priority_and_cadence() -> None:
    workload = kueue_workload()
    by_class: dict[str, list[tuple[float, float, int, float]]] = {}
    for item in workload.jobs:
        kind = item.name.split("-")[-2]
        cpu = item.job.roles[0].resources.get("cpu")
        by_class.setdefault(kind, []).append(
            (item.submit_time, item.duration, item.job.priority, cpu)
        )
    expected = {
        "small": (350, 0.1, 0.2, 50, 1),
        "medium": (100, 0.5, 0.5, 100, 5),
        "large": (50, 1.2, 1.0, 200, 20),
    }
    for kind, (count, every, runtime, priority, cores) in expected.items():
        rows = by_class[kind]
        assert len(rows) == 30 * count
        assert {(d, p, c) for _, d, p, c in rows} == {(runtime, priority, cores * 1000)}
        times = sorted({t for t, *_ in rows})
        assert times[0] == every and times[-1] == count * every
        assert len(times) == count
    assert workload.jobs[-1].submit_time == 60.0


def test_queues_mirror_nominal_quota_and_borrowing_limit() -> None:
    queues = {q.name: q for q in kueue_queues()}
    leaf = queues["cohort-2-cq-5"]
    assert leaf.parent == "cohort-2"
    assert leaf.deserved == _cpu(20) and leaf.capability == _cpu(120)
    assert leaf.guarantee == Resources()
    assert queues["cohort-2"].capability == _cpu(120)
    lifted = {q.name: q for q in kueue_queues(borrow_across_cohorts=True)}
    assert lifted["cohort-2"].capability is None


def test_the_paired_cluster_has_the_600_cpu_of_the_nominal_quotas() -> None:
    nodes = kueue_nodes()
    assert sum(node.capacity.get("cpu") for node in nodes) == 600_000
    assert all(node.capacity.get("memory") >= 2**40 for node in nodes)
    assert (
        sum(q.deserved.get("cpu") for q in kueue_queues() if q.parent != ROOT_QUEUE and q.deserved)
        == 600_000
    )


def test_until_takes_the_first_seconds() -> None:
    workload = kueue_workload(until=1.0)
    # Before t=1: 9 small (0.1 .. 0.9) and 1 medium (0.5) per queue.
    assert len(workload.jobs) == 30 * 10
