"""Kueue's published scheduler benchmark as a built-in workload.

Kueue's ``test/performance/scheduler/configs/baseline/generator.yaml``: 5 cohorts of 6
ClusterQueues, each with a nominal quota of 20 CPU and a borrowing limit of 100 CPU;
every ClusterQueue receives three streams of single-pod workloads:

======  =====  =========  =======  ========  ===
class   count  every      runtime  priority  CPU
======  =====  =========  =======  ========  ===
small   350    100 ms     200 ms   50        1
medium  100    500 ms     500 ms   100       5
large   50     1200 ms    1 s      200       20
======  =====  =========  =======  ========  ===

30 x 500 = 15,000 jobs. Kueue's generator waits one interval before each workload,
so the k-th (from 0) of a stream is submitted at ``(k + 1) x interval``.

Mapping to phalanx queues: a cohort is a parent queue ``cohort-<c>``; its
ClusterQueues are leaves ``cohort-<c>-cq-<i>`` with deserved = 20 CPU (nominal),
capability = 120 CPU (nominal + borrowing limit) and guarantee 0 (Kueue lends all
of a nominal quota unless a lending limit is set). In Kueue a cohort can only share
its members' nominal quotas, so by default the parent's capability is their sum
(120 CPU); ``borrow_across_cohorts=True`` lifts it (unlimited), which Kueue cannot do.
A job's user is its queue (Kueue puts each ClusterQueue's workloads in its own
namespace).

Cluster (``kueue_nodes``): Kueue's benchmark runs without nodes (quota only). The
paired cluster has the same 600 CPU as the 30 nominal quotas: 6 nodes of 100 CPU and
1Ti memory. Node boundaries can fragment CPU, which Kueue's run does not see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from phalanx.domain.job import Role
from phalanx.domain.node import Node
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.domain.resources import Resources
from phalanx.sim.traces._common import assemble, one_role_job
from phalanx.sim.workload import Workload, WorkloadJob

COHORTS: Final = 5
QUEUES_PER_COHORT: Final = 6
NOMINAL_CPU: Final = 20
BORROWING_LIMIT_CPU: Final = 100
NODES: Final = 6
NODE_CPU: Final = 100
NODE_MEMORY: Final = 2**40


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadClass:
    """One stream of identical workloads per ClusterQueue."""

    name: str
    count: int
    interval_ms: int
    runtime_ms: int
    priority: int
    cpu: int


CLASSES: Final = (
    WorkloadClass(name="small", count=350, interval_ms=100, runtime_ms=200, priority=50, cpu=1),
    WorkloadClass(name="medium", count=100, interval_ms=500, runtime_ms=500, priority=100, cpu=5),
    WorkloadClass(name="large", count=50, interval_ms=1200, runtime_ms=1000, priority=200, cpu=20),
)


def _cpu(cores: float) -> Resources:
    return Resources.of({"cpu": cores * 1000.0})


def kueue_queues(*, borrow_across_cohorts: bool = False) -> tuple[Queue, ...]:
    """The 5 cohort queues, each followed by its 6 ClusterQueue leaves."""
    pool = _cpu(NOMINAL_CPU * QUEUES_PER_COHORT)
    queues = []
    for c in range(COHORTS):
        cohort = f"cohort-{c}"
        cap = None if borrow_across_cohorts else pool
        queues.append(Queue(name=cohort, deserved=pool, capability=cap))
        queues.extend(
            Queue(
                name=f"{cohort}-cq-{i}",
                parent=cohort,
                deserved=_cpu(NOMINAL_CPU),
                capability=_cpu(NOMINAL_CPU + BORROWING_LIMIT_CPU),
            )
            for i in range(QUEUES_PER_COHORT)
        )
    return tuple(queues)


def kueue_workload(
    *,
    borrow_across_cohorts: bool = False,
    until: float | None = None,
    limit: int | None = None,
) -> Workload:
    """Kueue's baseline benchmark: 15,000 one-task jobs in 30 leaf queues.

    Job ``<queue>-<class>-<k>`` runs the class's runtime on the class's CPU.
    """
    queues = kueue_queues(borrow_across_cohorts=borrow_across_cohorts)
    roles = {kind.name: Role(name="main", replicas=1, resources=_cpu(kind.cpu)) for kind in CLASSES}
    jobs = [
        WorkloadJob(
            job=one_role_job(
                name=f"{queue.name}-{kind.name}-{k}",
                queue=queue.name,
                role=roles[kind.name],
                submit_time=(k + 1) * kind.interval_ms / 1000.0,
                user=queue.name,
                priority=kind.priority,
            ),
            duration=kind.runtime_ms / 1000.0,
        )
        for queue in queues
        if queue.parent != ROOT_QUEUE
        for kind in CLASSES
        for k in range(kind.count)
    ]
    notes = (
        "Kueue scheduler benchmark (baseline generator.yaml): 5 cohorts x 6 ClusterQueues",
        "cohorts share only their members' nominal quota"
        if not borrow_across_cohorts
        else "cohorts may borrow from each other (unlike Kueue)",
    )
    return assemble(jobs, queues=queues, source="kueue", notes=notes, until=until, limit=limit)


def kueue_nodes() -> tuple[Node, ...]:
    """The cluster paired with the benchmark: 6 nodes x 100 CPU, 1Ti memory (600 CPU)."""
    capacity = Resources.of({"cpu": NODE_CPU * 1000.0, "memory": float(NODE_MEMORY)})
    return tuple(Node(name=f"kueue-{i}", capacity=capacity) for i in range(NODES))
