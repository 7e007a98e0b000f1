"""How the CLI draws the API's views for people: amounts, ages, bars and tables.

Pure functions of the views (and ``now`` for ages): the same views draw the same text.
Amounts arrive in canonical units (cpu in millicores, memory in bytes) and are shown
the way documents write them (``8``, ``500m``, ``32Gi``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from rich.table import Table
from rich.text import Text

from phalanx.client import (
    JobSummaryView,
    NodeView,
    PipelineView,
    QueueView,
    RunView,
    StepView,
    TaskView,
)
from phalanx.domain.resources import Resources, format_amount

_PHASE_STYLE = {
    "Pending": "yellow",
    "Queued": "cyan",
    "Running": "green",
    "Succeeded": "blue",
    "Failed": "red",
    "Cancelled": "dim",
    "Skipped": "dim",
    "Cached": "blue",
}
_BLOCKS = " ▁▂▃▄▅▆▇█"


def amount(name: str, value: float | None) -> str:
    """``value`` of resource ``name`` for people; ``-`` when absent."""
    return "-" if value is None else format_amount(name, value)


def age(since: float | None, now: float) -> str:
    """``now - since`` as ``12s``, ``5m``, ``3h`` or ``2d``; ``-`` without a start."""
    if since is None:
        return "-"
    seconds = max(0.0, now - since)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def phase(text: str) -> Text:
    """A phase, coloured by what it means."""
    return Text(text, style=_PHASE_STYLE.get(text, ""))


#: Job phases after which no task runs again (``Deleted``: how a watch shows a job gone,
#: which ended before it went).
_ENDED: Final = frozenset({"Succeeded", "Failed", "Cancelled", "Deleted"})


def job_phase(job: JobSummaryView) -> Text:
    """A job's phase, with why it waits when it waits to retry: ``Pending (Retrying)``."""
    if job.phase == "Pending" and job.reason == "Retrying":
        return Text("Pending (Retrying)", style=_PHASE_STYLE["Pending"])
    return phase(job.phase)


def job_tasks(job: JobSummaryView) -> str:
    """The TASKS cell: ``running/all`` while the job is live; once it has ended, as
    kubectl's COMPLETIONS, ``succeeded/all`` (a finished gang of two: ``2/2``)."""
    total = sum(job.task_counts.values())
    done = job.phase in _ENDED
    shown = job.task_counts.get("Succeeded" if done else "Running", 0)
    return f"{shown}/{total}"


def attempt(job: JobSummaryView) -> str:
    """Which attempt the job is on, as the log headers number them (``--- attempt 2``),
    with its retries: ``2 (1 retry)``; ``1`` before any retry."""
    if not job.attempts:
        return "1"
    retries = "retry" if job.attempts == 1 else "retries"
    return f"{job.attempts + 1} ({job.attempts} {retries})"


def bar(used: float, total: float, width: int = 20) -> Text:
    """``[████░░░░] used/total`` filled by ``used / total``; green, yellow past 70 %, red past 90 %."""
    share = 0.0 if total <= 0 or math.isinf(total) else min(1.0, max(0.0, used / total))
    filled = round(share * width)
    style = "red" if share > 0.9 else "yellow" if share > 0.7 else "green"
    text = Text("[")
    text.append("█" * filled, style=style)
    text.append("░" * (width - filled), style="dim")
    text.append("]")
    return text


def cards(used: Sequence[float]) -> Text:
    """One block per GPU, as tall as the share of the card in use."""
    text = Text()
    for share in used:
        level = min(len(_BLOCKS) - 1, math.ceil(max(0.0, min(1.0, share)) * (len(_BLOCKS) - 1)))
        style = "red" if share > 0.9 else "yellow" if share > 0.7 else "green"
        text.append(_BLOCKS[level] if level else "·", style=style if level else "dim")
    return text


def task_counts(job: JobSummaryView) -> str:
    """``2 Running, 1 Pending``: the job's tasks by phase, most first; ``none`` without any."""
    ranked = sorted(job.task_counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count} {phase}" for phase, count in ranked if count) or "none"


_NODE_STYLES = {"NotReady": "red", "Draining": "red", "Drained": "yellow", "Cordoned": "yellow"}


def node_status(node: NodeView) -> Text:
    """Ready, NotReady, Cordoned, Draining or Drained (the server's ``status``)."""
    return Text(node.status, style=_NODE_STYLES.get(node.status, "green"))


def jobs_table(jobs: Sequence[JobSummaryView], now: float, *, wide: bool = False) -> Table:
    """One row per job: name, queue, user, phase (``Pending (Retrying)`` while it waits to
    retry), its place in its queue's line while it waits (``-`` otherwise), its tasks
    (``job_tasks``), GPUs held, age; wide adds what it requests, its nodes, its attempt,
    preemptions and why it is where it is."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "QUEUE", "USER", "PHASE", "POSITION", "TASKS", "GPUS", "AGE"):
        table.add_column(title, overflow="fold", no_wrap=title not in ("NAME",))
    if wide:
        for title in ("REQUESTS", "NODES", "ATTEMPT", "PREEMPTIONS", "REASON", "MESSAGE"):
            table.add_column(title, overflow="fold")
    for job in jobs:
        row: list[str | Text] = [
            job.name,
            job.queue,
            job.user,
            job_phase(job),
            "-" if job.queue_position is None else str(job.queue_position),
            job_tasks(job),
            amount("gpu", job.allocated.get("gpu", 0.0)),
            age(job.created_at, now),
        ]
        if wide:
            row += [
                Resources.of(job.requests).describe(),
                ",".join(job.nodes) or "-",
                attempt(job),
                str(job.preemptions),
                job.reason,
                job.message,
            ]
        table.add_row(*row)
    return table


def runs_table(runs: Sequence[RunView], now: float) -> Table:
    """One row per run: id, pipeline, user, phase, age, how long it ran, the run it
    resumes."""
    table = Table(box=None, pad_edge=False)
    for title in ("RUN", "PIPELINE", "USER", "PHASE", "AGE", "DURATION", "RESUMES"):
        table.add_column(title, overflow="fold", no_wrap=title != "RUN")
    for run in runs:
        table.add_row(
            run.id,
            run.pipeline,
            run.user,
            phase(run.phase),
            age(run.created_at, now),
            seconds((run.finished_at or now) - run.created_at),
            run.resumed_from or "-",
        )
    return table


def pipelines_table(pipelines: Sequence[PipelineView], now: float) -> Table:
    """One row per pipeline: name, owner, steps, schedule and when it next fires."""
    table = Table(box=None, pad_edge=False)
    for title in ("PIPELINE", "USER", "STEPS", "SCHEDULE", "NEXT RUN"):
        table.add_column(title, overflow="fold")
    for each in pipelines:
        spec = each.document.get("spec", {})
        schedule = spec.get("schedule") or {}
        table.add_row(
            each.name,
            each.user,
            str(len(spec.get("steps", {})) + len(spec.get("finally", {}))),
            " ".join(filter(None, [schedule.get("cron"), schedule.get("concurrencyPolicy")]))
            or "-",
            "-" if each.next_run_at is None else f"in {age(now, each.next_run_at)}",
        )
    return table


def steps_table(steps: Sequence[StepView], now: float) -> Table:
    """One row per unit of a run: what it waits for, its phase, attempt, job and
    duration (why it is where it is: ``step_reasons``)."""
    table = Table(box=None, pad_edge=False)
    for title in ("STEP", "AFTER", "PHASE", "ATTEMPT", "JOB", "DURATION"):
        table.add_column(title, overflow="fold")
    for step in steps:
        ran = (
            "-" if step.started_at is None else seconds((step.finished_at or now) - step.started_at)
        )
        table.add_row(
            step.unit,
            ",".join(step.after) or "-",
            phase(step.phase),
            str(step.attempt) if step.attempt else "-",
            step.job or "-",
            ran,
        )
    return table


def step_reasons(steps: Sequence[StepView], now: float) -> Table | None:
    """Each unit that has a reason, with it: a table to print at the terminal's width,
    the reasons wrapped at words (a reason can run to hundreds of characters); None
    when no unit has one."""
    reasons = [(step.unit, _step_reason(step, now)) for step in steps]
    reasons = [(unit, reason) for unit, reason in reasons if reason]
    if not reasons:
        return None
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for unit, reason in reasons:
        table.add_row(unit, reason)
    return table


def _step_reason(step: StepView, now: float) -> str:
    """Why a unit is where it is; for one waiting out a retry backoff, when it retries."""
    if step.retry_at is None:
        return step.reason or ""
    return f"retrying in {seconds(step.retry_at - now)}: {step.reason}"


def seconds(value: float) -> str:
    """A duration for people: ``0.42s``, ``12.3s``, ``5m3s``."""
    value = max(0.0, value)
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    return f"{int(value // 60)}m{int(value % 60)}s"


def tasks_table(tasks: Sequence[TaskView]) -> Table:
    """One row per task: name, role, phase, node, GPU cards, exit code."""
    table = Table(box=None, pad_edge=False)
    for title in ("TASK", "ROLE", "PHASE", "NODE", "GPUS", "EXIT"):
        table.add_column(title, overflow="fold")
    for task in tasks:
        table.add_row(
            task.name,
            task.role,
            phase(task.phase),
            task.node or "-",
            ",".join(map(str, task.gpus)) or "-",
            "-" if task.exit_code is None else str(task.exit_code),
        )
    return table


def queues_table(queues: Sequence[QueueView], *, wide: bool = False) -> Table:
    """One row per queue: GPUs allocated against deserved and capability, job counts."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "PARENT", "WEIGHT", "GPU ALLOC", "DESERVED", "CAP", "RUNNING", "PENDING"):
        table.add_column(title, overflow="fold")
    if wide:
        for title in ("GUARANTEE", "CPU ALLOC", "MEMORY ALLOC", "SUBMITTERS"):
            table.add_column(title, overflow="fold")
    for queue in queues:
        row: list[str | Text] = [
            queue.name,
            queue.parent,
            f"{queue.weight:g}",
            amount("gpu", queue.allocated.get("gpu", 0.0)),
            amount("gpu", queue.deserved.get("gpu")),
            amount("gpu", queue.capability["gpu"]) if "gpu" in queue.capability else "unlimited",
            str(queue.jobs.get("Running", 0)),
            str(queue.jobs.get("Pending", 0) + queue.jobs.get("Queued", 0)),
        ]
        if wide:
            row += [
                resources(queue.guarantee) or "-",
                amount("cpu", queue.allocated.get("cpu", 0.0)),
                amount("memory", queue.allocated.get("memory", 0.0)),
                "everyone" if queue.submitters is None else ",".join(queue.submitters),
            ]
        table.add_row(*row)
    return table


def nodes_table(nodes: Sequence[NodeView], *, wide: bool = False) -> Table:
    """One row per node: status, GPUs (one block per card), CPU and memory in use, tasks;
    wide adds its address, GPU models and labels."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "STATUS", "GPUS", "GPU USE", "CPU", "MEMORY", "TASKS"):
        table.add_column(title, overflow="fold")
    if wide:
        table.add_column("ADDRESS", overflow="fold")
        table.add_column("GPU MODEL", overflow="fold")
        table.add_column("LABELS", overflow="fold")
    for node in nodes:
        used = sum(gpu.used for gpu in node.gpus)
        row: list[str | Text] = [
            node.name,
            node_status(node),
            f"{used:g}/{len(node.gpus)}",
            cards([gpu.used for gpu in node.gpus]),
            f"{amount('cpu', node.allocated.get('cpu', 0.0))}/{amount('cpu', node.capacity.get('cpu'))}",
            f"{amount('memory', node.allocated.get('memory', 0.0))}/"
            f"{amount('memory', node.capacity.get('memory'))}",
            str(node.tasks),
        ]
        if wide:
            models = sorted({gpu.model for gpu in node.gpus if gpu.model})
            labels = ",".join(f"{k}={v}" for k, v in sorted(node.labels.items()))
            row += [node.address or "-", ",".join(models) or "-", labels or "-"]
        table.add_row(*row)
    return table


def resources(amounts: Mapping[str, float]) -> str:
    """``cpu=8, gpu=4`` for the non-zero amounts."""
    return ", ".join(f"{k}={amount(k, v)}" for k, v in sorted(amounts.items()) if v)
