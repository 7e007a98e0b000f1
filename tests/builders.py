"""Keyword-only builders for tests: nodes, queues, jobs and configs with sensible defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.job import Job, JobPhase, NodeSelectorRequirement, Role, Task, TaskPhase
from phalanx.domain.node import Node, Taint, Toleration
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import Decisions, SchedulerConfig, Snapshot, run_cycle

GiB = 2**30


def res(cpu: float = 0, memory_gib: float = 0, gpu: float = 0, **extra: float) -> Resources:
    """Resources in people's units: cpu cores, memory GiB, gpu devices.

    Names left at zero are left out (for a quota: no limit of its own on that name);
    write ``Resources.of({"gpu": 0})`` for an explicit zero.
    """
    amounts = {"cpu": cpu * 1000, "memory": memory_gib * GiB, "gpu": gpu, **extra}
    return Resources.of({name: value for name, value in amounts.items() if value})


def make_node(
    name: str = "n0",
    *,
    cpu: float = 16,
    memory_gib: float = 64,
    gpus: int = 8,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    max_tasks: int | None = None,
    schedulable: bool = True,
) -> Node:
    return Node(
        name=name,
        capacity=res(cpu, memory_gib, gpus),
        labels=dict(labels or {}),
        taints=tuple(taints),
        max_tasks=max_tasks,
        schedulable=schedulable,
    )


def make_nodes(count: int, *, prefix: str = "n", **kwargs: object) -> list[Node]:
    return [make_node(f"{prefix}{i}", **kwargs) for i in range(count)]  # type: ignore[arg-type]


def make_queue(
    name: str = "default",
    *,
    parent: str = "root",
    weight: float = 1,
    guarantee: Resources | None = None,
    deserved: Resources | None = None,
    capability: Resources | None = None,
    reclaimable: bool = True,
    overcommit: bool = False,
    starvation: float | None = None,
    priority: int = 0,
    cells: Mapping[str, int] | None = None,
) -> Queue:
    """A queue; ``cells`` (cell type -> count) makes it a virtual cluster (hived)."""
    return Queue(
        name=name,
        parent=parent,
        weight=weight,
        guarantee=guarantee or Resources(),
        deserved=deserved,
        capability=capability,
        reclaimable=reclaimable,
        overcommit=overcommit,
        starvation_threshold=starvation,
        priority=priority,
        cells=tuple(CellGuarantee(type=t, count=n) for t, n in (cells or {}).items()),
    )


def make_job(
    name: str = "j",
    *,
    queue: str = "default",
    gpus: float = 1,
    cpu: float = 1,
    memory_gib: float = 1,
    replicas: int = 1,
    min_available: int | None = None,
    priority: int = 0,
    user: str = "u",
    created: float = 0.0,
    phase: JobPhase = JobPhase.QUEUED,
    running_on: Sequence[str] = (),
    started: float = 0.0,
    walltime: float | None = None,
    runtime_estimate: float | None = None,
    starvation: float | None = None,
    roles: Sequence[Role] | None = None,
    preemptible: bool = True,
    node_selector: Mapping[str, str] | None = None,
    affinity: Sequence[NodeSelectorRequirement] = (),
    tolerations: Sequence[Toleration] = (),
    pending_since: float | None = None,
) -> Job:
    """A one-role job; ``running_on`` puts its first tasks on those nodes (Running)."""
    if roles is None:
        roles = (
            Role(
                name="worker",
                replicas=replicas,
                resources=res(cpu, memory_gib, gpus),
                node_selector=dict(node_selector or {}),
                affinity=tuple(affinity),
                tolerations=tuple(tolerations),
            ),
        )
    tasks: tuple[Task, ...] = ()
    if running_on:
        all_tasks = [Task(role=r.name, index=i) for r in roles for i in range(r.replicas)]
        tasks = tuple(
            Task(
                role=t.role,
                index=t.index,
                phase=TaskPhase.RUNNING,
                node=running_on[k],
                start_time=started,
            )
            if k < len(running_on)
            else t
            for k, t in enumerate(all_tasks)
        )
        phase = JobPhase.RUNNING
    return Job(
        name=name,
        queue=queue,
        roles=tuple(roles),
        user=user,
        priority=priority,
        min_available=min_available,
        phase=phase,
        creation_time=created,
        pending_since=pending_since,
        tasks=tasks,
        walltime=walltime,
        runtime_estimate=runtime_estimate,
        starvation_threshold=starvation,
        preemptible=preemptible,
    )


def config(
    actions: Sequence[str], *tiers: Sequence[str | tuple[str, Mapping[str, object]]]
) -> SchedulerConfig:
    return SchedulerConfig.build(list(actions), [list(t) for t in tiers])


def cycle(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    cfg: SchedulerConfig,
    *,
    queues: Sequence[Queue] = (),
    now: float = 0.0,
) -> Decisions:
    if not queues:
        queues = [make_queue("default")]
    return run_cycle(Snapshot.build(nodes=nodes, queues=queues, jobs=jobs), cfg, now=now)


def bound(decisions: Decisions, job: str) -> list[str]:
    """Nodes of ``job``'s binds, in order."""
    return [b.node for b in decisions.binds if b.job == job]


def evicted(decisions: Decisions, job: str | None = None) -> list[str]:
    return [e.task for e in decisions.evictions if job is None or e.job == job]
