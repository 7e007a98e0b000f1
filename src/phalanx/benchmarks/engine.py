"""The engine benchmark: one full session on a generated cluster.

Shape after YuniKorn's core benchmark: nodes of 16 CPU, 64 GiB, 8 GPUs; ``queues`` x
``jobs_per_queue`` jobs of ``tasks_per_job`` pending tasks (1 CPU, 1 GiB each). With
``gpu_mix`` jobs are gangs of 1/2/4/8/16/64 GPUs (8 GPUs per task at most). With
``running`` that many small tasks (100m CPU, 256 MiB) already run, spread evenly, as
in KAI-Scheduler's busy-cluster case. ``seconds`` covers building the snapshot from
every job plus the session; ``incremental_cycle_s`` is one session on a ``ClusterState``
kept up to date between cycles (how the simulator and control plane run), fork and
revert included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from phalanx.domain.job import Job, JobPhase, Role, Task, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import SchedulerConfig, Snapshot, default_config, run_cycle
from phalanx.engine.state import ClusterState

GIB = 2**30
GPU_MIX = (1, 2, 4, 8, 16, 64)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineBenchSpec:
    """What to generate."""

    nodes: int = 5000
    queues: int = 5
    jobs_per_queue: int = 80
    tasks_per_job: int = 125
    gpu_mix: bool = False
    running: int = 0


def generate(spec: EngineBenchSpec) -> tuple[list[Node], list[Queue], list[Job]]:
    """The cluster, queues and jobs of ``spec`` (deterministic)."""
    capacity = Resources.of({"cpu": 16000, "memory": 64 * GIB, "gpu": 8})
    nodes = [Node(name=f"node-{i}", capacity=capacity) for i in range(spec.nodes)]
    queues = [Queue(name=f"queue-{q}") for q in range(spec.queues)]
    jobs: list[Job] = []
    for q in range(spec.queues):
        for j in range(spec.jobs_per_queue):
            jobs.append(_pending_job(spec, q, j))
    if spec.running:
        jobs.extend(_running_jobs(spec, nodes))
    return nodes, queues, jobs


def _pending_job(spec: EngineBenchSpec, q: int, j: int) -> Job:
    name = f"q{q}-job-{j}"
    created = float(q * spec.jobs_per_queue + j)
    if not spec.gpu_mix:
        role = Role(
            name="task",
            replicas=spec.tasks_per_job,
            resources=Resources.of({"cpu": 1000, "memory": GIB}),
        )
        return Job(
            name=name,
            queue=f"queue-{q}",
            roles=(role,),
            phase=JobPhase.QUEUED,
            creation_time=created,
        )
    gpus = GPU_MIX[(q + j) % len(GPU_MIX)]
    per_task = min(gpus, 8)
    role = Role(
        name="worker",
        replicas=gpus // per_task,
        resources=Resources.of({"cpu": 1000 * per_task, "memory": GIB * per_task, "gpu": per_task}),
    )
    return Job(
        name=name, queue=f"queue-{q}", roles=(role,), phase=JobPhase.QUEUED, creation_time=created
    )


def _running_jobs(spec: EngineBenchSpec, nodes: list[Node]) -> list[Job]:
    per_job = 10
    small = Resources.of({"cpu": 100, "memory": 256 * 2**20})
    jobs = []
    for j in range(spec.running // per_job):
        role = Role(name="pod", replicas=per_job, resources=small)
        tasks = tuple(
            Task(
                role="pod",
                index=i,
                phase=TaskPhase.RUNNING,
                node=nodes[(j * per_job + i) % len(nodes)].name,
                start_time=0.0,
            )
            for i in range(per_job)
        )
        jobs.append(
            Job(
                name=f"running-{j}",
                queue=f"queue-{j % spec.queues}",
                roles=(role,),
                phase=JobPhase.RUNNING,
                tasks=tasks,
                creation_time=-1.0,
            )
        )
    return jobs


def run(
    spec: EngineBenchSpec, config: SchedulerConfig | None = None
) -> dict[str, float | int | bool]:
    """Build the snapshot and run one session; report counts and timings."""
    nodes, queues, jobs = generate(spec)
    pending = sum(job.replicas for job in jobs if job.phase is not JobPhase.RUNNING)
    started = time.perf_counter()
    snapshot = Snapshot.build(nodes=nodes, queues=queues, jobs=jobs)
    built = time.perf_counter()
    decisions = run_cycle(snapshot, config or default_config(), now=0.0)
    done = time.perf_counter()
    gpus_of = {job.name: job.roles[0].resources.get("gpu") for job in jobs}
    seconds = done - started
    return {
        "nodes": spec.nodes,
        "queues": spec.queues,
        "jobs": len(jobs),
        "tasks": pending,
        "running": spec.running,
        "gpu_mix": spec.gpu_mix,
        "tasks_bound": len(decisions.binds),
        "gpus_bound": sum(gpus_of[bind.job] for bind in decisions.binds),
        "jobs_unschedulable": len(decisions.unschedulable),
        "snapshot_s": round(built - started, 4),
        "session_s": round(done - built, 4),
        "seconds": round(seconds, 4),
        "tasks_per_s": round(len(decisions.binds) / seconds, 1) if seconds > 0 else 0.0,
        "incremental_cycle_s": round(_incremental_cycle(nodes, queues, jobs, config), 4),
    }


def _incremental_cycle(
    nodes: list[Node], queues: list[Queue], jobs: list[Job], config: SchedulerConfig | None
) -> float:
    """One session on state kept up to date between cycles (as drivers run), fork and
    revert included."""
    state = ClusterState(nodes, queues)
    for job in jobs:
        state.add_job(job)
    started = time.perf_counter()
    state.cycle(config or default_config(), now=0.0)
    return time.perf_counter() - started
