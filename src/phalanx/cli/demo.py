"""``phalanx demo``: a day on a small shared GPU cluster, decided by the real engine.

Four 8-GPU nodes, three queues (two teams with guarantees and an over-issued batch
queue), and a script of submissions. Every minute a scheduling session runs; the demo
applies its Decisions (binds start tasks, evictions stop them a minute later, finished
jobs leave) and prints what was decided and why, in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rich.console import Console
from rich.table import Table

from phalanx.domain.job import Job, JobPhase, Role, Task, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import Decisions, SchedulerConfig, Snapshot, run_cycle

GIB = 2**30
MINUTE = 60.0


def _gpus(count: float, cpu: float = 8, memory_gib: float = 64) -> Resources:
    return Resources.of({"cpu": cpu * 1000, "memory": memory_gib * GIB, "gpu": count})


NODES = [Node(name=f"dgx-{i}", capacity=_gpus(8, cpu=64, memory_gib=512)) for i in range(4)]
QUEUES = [
    Queue(name="research", guarantee=_gpus(8, 64, 512), deserved=_gpus(16, 128, 1024)),
    Queue(name="prod", guarantee=_gpus(8, 64, 512), deserved=_gpus(16, 128, 1024)),
    Queue(name="batch", deserved=_gpus(0, 0, 0), capability=_gpus(0, 0, 0), overcommit=True),
]
CONFIG = SchedulerConfig.build(
    ["enqueue", "allocate", "reclaim", "preempt", "backfill"],
    [["priority", "gang", "sla", "overcommit"], ["drf", "predicates", "capacity", "binpack"]],
)


def _job(name: str, queue: str, *, at: float, gpus: int, replicas: int = 1, **extra: object) -> Job:
    role = Role(name="worker", replicas=replicas, resources=_gpus(gpus))
    return Job(name=name, queue=queue, roles=(role,), creation_time=at, **extra)  # type: ignore[arg-type]


SCRIPT: list[tuple[Job, float]] = [  # (job, run time in seconds)
    *[(_job(f"sweep-{i}", "batch", at=0, gpus=1, walltime=900), 840.0) for i in range(24)],
    (
        _job("bert-pretrain", "research", at=0, gpus=8, replicas=2, min_available=1, walltime=2400),
        2100.0,
    ),
    (
        _job("llama-finetune", "prod", at=120, gpus=8, replicas=2, min_available=2, walltime=1500),
        1440.0,
    ),
    (_job("hotfix-eval", "research", at=300, gpus=8, priority=100, walltime=600), 540.0),
    (
        _job(
            "moe-64gpu",
            "prod",
            at=360,
            gpus=8,
            replicas=4,
            min_available=4,
            starvation_threshold=300,
        ),
        1200.0,
    ),
    *[
        (_job(f"notebook-{i}", "prod", at=420 + 120 * i, gpus=1, walltime=600), 480.0)
        for i in range(6)
    ],
    (_job("too-big", "prod", at=360, gpus=16), 60.0),
]


@dataclass
class DemoCluster:
    """Applies Decisions to job state the way a real executor and controller would."""

    jobs: dict[str, Job] = field(default_factory=dict)
    runtime: dict[str, float] = field(default_factory=dict)
    stopping: list[tuple[float, str, str]] = field(default_factory=list)  # (at, job, task)

    def submit(self, job: Job, runtime: float) -> None:
        self.jobs[job.name] = job
        self.runtime[job.name] = runtime

    def live(self) -> list[Job]:
        return [
            j for j in self.jobs.values() if j.phase not in (JobPhase.SUCCEEDED, JobPhase.CANCELLED)
        ]

    def apply(self, decisions: Decisions, now: float) -> None:
        for admit in decisions.admitted:
            self.jobs[admit.job] = replace(self.jobs[admit.job], phase=JobPhase.QUEUED)
        for bind in decisions.binds:
            self._set_task(bind.job, bind.task, TaskPhase.RUNNING, bind.node, now)
        for evict in decisions.evictions:
            self._set_task(evict.job, evict.task, TaskPhase.RELEASING, None, None)
            self.stopping.append((now + MINUTE, evict.job, evict.task))

    def advance(self, now: float) -> list[str]:
        """Stop evicted tasks and finish jobs whose run time is over; return what happened."""
        events = []
        for at, job_name, task_name in list(self.stopping):
            if at <= now:
                self.stopping.remove((at, job_name, task_name))
                self._set_task(job_name, task_name, TaskPhase.PENDING, None, None)
                self.jobs[job_name] = replace(self.jobs[job_name], pending_since=now)
        for job in self.live():
            starts = [
                t.start_time
                for t in job.tasks
                if t.phase is TaskPhase.RUNNING and t.start_time is not None
            ]
            if (
                starts
                and job.phase is JobPhase.RUNNING
                and now >= max(starts) + self.runtime[job.name]
            ):
                self.jobs[job.name] = replace(job, phase=JobPhase.SUCCEEDED, tasks=())
                events.append(f"{job.name} finished")
        return events

    def _set_task(
        self, job_name: str, task_name: str, phase: TaskPhase, node: str | None, start: float | None
    ) -> None:
        job = self.jobs[job_name]
        tasks = [
            Task(role=t.role, index=t.index, phase=phase, node=node, start_time=start)
            if t.name(job.name) == task_name
            else t
            for t in job.all_tasks()
        ]
        running = any(t.phase in (TaskPhase.RUNNING, TaskPhase.RELEASING) for t in tasks)
        job_phase = JobPhase.RUNNING if running else JobPhase.QUEUED
        self.jobs[job_name] = replace(job, tasks=tuple(tasks), phase=job_phase)


def _usage_table(cluster: DemoCluster) -> Table:
    table = Table(title="GPUs in use by queue", show_edge=False)
    for column in ("queue", "running GPUs", "deserved", "guarantee"):
        table.add_column(column, justify="right" if column != "queue" else "left")
    for queue in QUEUES:
        used = sum(
            role.resources.get("gpu")
            for job in cluster.live()
            if job.queue == queue.name
            for role in job.roles
            for t in job.tasks
            if t.phase is TaskPhase.RUNNING and t.role == role.name
        )
        deserved = queue.deserved.get("gpu") if queue.deserved is not None else 0
        table.add_row(queue.name, f"{used:g}", f"{deserved:g}", f"{queue.guarantee.get('gpu'):g}")
    return table


def _report(console: Console, decisions: Decisions, told: dict[str, str]) -> None:
    for job in sorted({b.job for b in decisions.binds}):
        nodes = sorted({b.node for b in decisions.binds if b.job == job})
        count = sum(1 for b in decisions.binds if b.job == job)
        console.print(f"  [green]placed[/] {job}: {count} task(s) on {', '.join(nodes)}")
    for evict in decisions.evictions:
        console.print(f"  [red]{evict.action}[/] {evict.task} on {evict.node}: {evict.reason}")
    placed = {b.job for b in decisions.binds}
    for res in decisions.reservations:
        if res.job in placed or told.get(f"reservation:{res.job}") == f"{res.start_time}":
            continue
        told[f"reservation:{res.job}"] = f"{res.start_time}"
        console.print(
            f"  [cyan]reserved[/] {', '.join(res.nodes)} for {res.job}, start by t={res.start_time / MINUTE:g} min"
        )
    for item in decisions.unschedulable:
        if not item.job.startswith("sweep-") and told.get(item.job) != item.reason.code:
            told[item.job] = item.reason.code
            console.print(f"  [yellow]waiting[/] {item.job}: {item.reason.message}")
    for line in decisions.explanations:
        if "sweep-" not in line:
            console.print(f"  [magenta]note[/] {line}")


def demo(minutes: int = 60) -> None:
    """Run the demo scenario: one scheduling session per simulated minute."""
    console = Console()
    console.rule(
        "[bold]phalanx demo: 4 nodes x 8 GPUs, queues research / prod / batch (over-issued)"
    )
    cluster = DemoCluster()
    told: dict[str, str] = {}  # the reason code last printed per waiting job
    script = sorted(SCRIPT, key=lambda item: (item[0].creation_time, item[0].name))
    for minute in range(minutes + 1):
        now = minute * MINUTE
        events = cluster.advance(now)
        arrivals = [job for job, _ in script if job.creation_time == now]
        for job, runtime in script:
            if job.creation_time == now:
                cluster.submit(job, runtime)
        snapshot = Snapshot.build(nodes=NODES, queues=QUEUES, jobs=cluster.live())
        decisions = run_cycle(snapshot, CONFIG, now=now)
        cluster.apply(decisions, now)
        if arrivals or decisions.binds or decisions.evictions or events:
            console.print(f"[bold]t={minute} min[/]")
            for job in arrivals:
                if not job.name.startswith("sweep-") or job.name == "sweep-0":
                    label = (
                        "24 x 1-GPU sweeps"
                        if job.name == "sweep-0"
                        else f"{job.name} ({job.replicas} x {job.roles[0].resources.get('gpu'):g} GPUs, min {job.gang_size})"
                    )
                    console.print(f"  [blue]submitted[/] {label} to {job.queue}")
            for event in events:
                console.print(f"  [blue]{event}[/]")
            _report(console, decisions, told)
    console.print(_usage_table(cluster))
    finished = sum(1 for j in cluster.jobs.values() if j.phase is JobPhase.SUCCEEDED)
    console.print(
        f"{finished} of {len(cluster.jobs)} jobs finished in {minutes} simulated minutes."
    )
