"""Colocation in the simulator: offline work yields to online services above the SLA watermark.

The seed's example (Baidu, GPU offline mixing): a node runs an online service and an
offline job. At T1 the service's load rises above the watermark, so the offline job is
held (its processes stay, it gets no GPU time); at T2 the load falls back and the offline
job runs again on what the service leaves.
"""

from __future__ import annotations

from dataclasses import replace

from phalanx.domain.job import Job, Role, ServiceClass
from phalanx.domain.node import Gpu, Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine.decisions import Bind
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.executors.base import TaskEventKind
from phalanx.sim.cluster import SimCluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob

T1, T2 = 100.0, 200.0
#: 30% busy, above the 80% watermark from T1 to T2, then 30% again
PEAK = ((0.0, 0.3), (T1, 0.9), (T2, 0.3))


def _job(name: str, kind: ServiceClass, *, gpu: float = 0.5, at: float = 0.0) -> Job:
    role = Role(name="w", replicas=1, resources=Resources.of({"gpu": gpu, "cpu": 1000}))
    return Job(name=name, queue="q", roles=(role,), service_class=kind, creation_time=at)


def _jobs() -> dict[str, WorkloadJob]:
    return {
        "svc": WorkloadJob(job=_job("svc", ServiceClass.ONLINE), duration=1000.0, load=PEAK),
        "train": WorkloadJob(job=_job("train", ServiceClass.OFFLINE), duration=140.0),
    }


def _bind(job: str, node: str = "n0") -> Bind:
    return Bind(job=job, task=f"{job}-w-0", role="w", index=0, node=node, gpus=(0,))


def _end(cluster: SimCluster, job: str) -> float:
    while (at := cluster.next_event_time()) is not None:
        for event in cluster.poll(now=at):
            if event.job == job and event.kind is TaskEventKind.EXITED:
                return event.time
    raise AssertionError(f"{job} never ended")


def test_offline_work_is_held_above_the_watermark_and_resumes_below_it() -> None:
    cluster = SimCluster(_jobs(), watermark=0.8)
    cluster.start([_bind("svc"), _bind("train")], now=0.0)
    # 0..T1 at 0.7 (70 of 140 done), held T1..T2, then 0.7 again: 70 more take 100 s
    assert _end(cluster, "train") == 300.0


def test_without_a_watermark_offline_work_runs_at_full_speed() -> None:
    cluster = SimCluster(_jobs())
    cluster.start([_bind("svc"), _bind("train")], now=0.0)
    assert _end(cluster, "train") == 140.0


def test_offline_work_on_another_node_is_not_slowed() -> None:
    cluster = SimCluster(_jobs(), watermark=0.8)
    cluster.start([_bind("svc", "n0"), _bind("train", "n1")], now=0.0)
    assert _end(cluster, "train") == 140.0


def test_offline_work_gets_the_gpus_back_when_the_service_ends() -> None:
    jobs = _jobs()
    jobs["svc"] = replace(jobs["svc"], duration=150.0)  # ends while above the watermark
    cluster = SimCluster(jobs, watermark=0.8)
    cluster.start([_bind("svc"), _bind("train")], now=0.0)
    assert _end(cluster, "train") == 220.0  # 70 by T1, held to 150, then 70 at full speed


def test_the_simulation_colocates_and_enforces_the_watermark() -> None:
    node = Node(
        name="n0",
        capacity=Resources.of({"gpu": 1, "cpu": 8000}),
        gpus=(Gpu(index=0),),
    )
    config = SchedulerConfig.build(
        ["allocate"], [["gang", "predicates"], ["gpu-share", "colocation"]]
    )
    workload = Workload(jobs=tuple(_jobs().values()), queues=(Queue(name="q"),))
    sim = Simulation([node], workload, config, options=SimOptions(sla_watermark=0.8))
    records = sim.run().jobs
    # both start at 1 s (the first session); 99 s at 0.7, held to T2, 70.7 left at 0.7
    assert records["train"].end == 301.0
    assert records["svc"].end == 1001.0
