"""``phalanx sim story``: an hour on a small shared GPU cluster, decided by the real engine.

Four 8-GPU nodes, three queues (two teams with guarantees and an over-issued batch
queue), and a script of submissions, played by the simulator: a session on each
arrival and release and every minute while work waits, evicted tasks stop a minute
later, jobs end after their run time. Each session's Decisions are printed as they
come, with the engine's own reasons, in plain words.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from phalanx.domain.job import Job, Role
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import Decisions, SchedulerConfig
from phalanx.engine.state import ClusterState
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob

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


def _usage_table(state: ClusterState) -> Table:
    table = Table(title="GPUs in use by queue", show_edge=False)
    for column in ("queue", "running GPUs", "deserved", "guarantee"):
        table.add_column(column, justify="right" if column != "queue" else "left")
    snapshot = state.snapshot
    gpu = list(snapshot.dims).index("gpu")
    for queue in QUEUES:
        used = snapshot.queues[queue.name].allocated[gpu] / snapshot.unit[gpu]
        deserved = queue.deserved.get("gpu") if queue.deserved is not None else 0
        table.add_row(queue.name, f"{used:g}", f"{deserved:g}", f"{queue.guarantee.get('gpu'):g}")
    return table


def _report(decisions: Decisions, told: dict[str, str]) -> list[str]:
    """Lines that tell a session's Decisions (each waiting reason and reservation once)."""
    lines = []
    for job in sorted({b.job for b in decisions.binds}):
        nodes = sorted({b.node for b in decisions.binds if b.job == job})
        count = sum(1 for b in decisions.binds if b.job == job)
        lines.append(f"  [green]placed[/] {job}: {count} task(s) on {', '.join(nodes)}")
    for evict in decisions.evictions:
        lines.append(f"  [red]{evict.action}[/] {evict.task} on {evict.node}: {evict.reason}")
    placed = {b.job for b in decisions.binds}
    for res in decisions.reservations:
        if res.job in placed or told.get(f"reservation:{res.job}") == f"{res.start_time}":
            continue
        told[f"reservation:{res.job}"] = f"{res.start_time}"
        lines.append(
            f"  [cyan]reserved[/] {', '.join(res.nodes)} for {res.job}, "
            f"start by t={res.start_time / MINUTE:g} min"
        )
    for item in decisions.unschedulable:
        if not item.job.startswith("sweep-") and told.get(item.job) != item.reason.code:
            told[item.job] = item.reason.code
            lines.append(f"  [yellow]waiting[/] {item.job}: {item.reason.message}")
    lines += [
        f"  [magenta]note[/] {line}" for line in decisions.explanations if "sweep-" not in line
    ]
    return lines


def _submitted(job: Job) -> str | None:
    if job.name.startswith("sweep-"):
        return "24 x 1-GPU sweeps" if job.name == "sweep-0" else None
    gpus = job.roles[0].resources.get("gpu")
    return f"{job.name} ({job.replicas} x {gpus:g} GPUs, min {job.gang_size})"


class _Narrator:
    """Prints what happens, under a heading for each moment something does."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.told: dict[str, str] = {}  # what was last said of a waiting job or reservation
        self._heading: float | None = None
        self._jobs = {job.name: job for job, _ in SCRIPT}

    def at(self, now: float) -> None:
        if now != self._heading:
            self._heading = now
            minutes, seconds = divmod(round(now), 60)
            self.console.print(
                f"[bold]t={minutes} min" + (f" {seconds} s" if seconds else "") + "[/]"
            )

    def event(self, row: dict[str, object]) -> None:
        t, ev, name = float(row["t"]), row["ev"], str(row["job"])  # type: ignore[arg-type]
        if ev == "Submitted":
            label = _submitted(self._jobs[name])
            if label is not None:
                self.at(t)
                self.console.print(f"  [blue]submitted[/] {label} to {row['queue']}")
        elif ev == "Succeeded" and not name.startswith("sweep-"):
            self.at(t)
            self.console.print(f"  [blue]{name} finished[/]")

    def session(self, now: float, decisions: Decisions) -> None:
        lines = _report(decisions, self.told)
        if lines:
            self.at(now)
        for line in lines:
            self.console.print(line)


def story(minutes: int = 60) -> None:
    """Play a scheduling story on the simulator for ``minutes`` simulated minutes, explaining every decision."""
    console = Console()
    console.rule(
        "[bold]phalanx sim story: 4 nodes x 8 GPUs, queues research / prod / batch (over-issued)"
    )
    workload = Workload(
        jobs=tuple(
            WorkloadJob(job=job, duration=runtime)
            for job, runtime in sorted(
                SCRIPT, key=lambda item: (item[0].creation_time, item[0].name)
            )
        )
    )
    narrator = _Narrator(console)
    options = SimOptions(
        period=MINUTE, max_period=MINUTE, trigger_delay=0.0, grace=MINUTE, until=minutes * MINUTE
    )
    simulation = Simulation(
        NODES,
        workload,
        CONFIG,
        queues=QUEUES,
        options=options,
        on_event=narrator.event,
        on_session=narrator.session,
    )
    metrics = simulation.run()
    console.print(_usage_table(simulation.state))
    finished = sum(record.outcome == "finished" for record in metrics.jobs.values())
    console.print(
        f"{finished} of {len(metrics.jobs)} jobs finished in {minutes} simulated minutes."
    )
