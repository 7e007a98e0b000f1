"""How the CLI shows GPUs at work: a job's use of its cards, each card's readings."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from phalanx.cli import render
from phalanx.client import GpuUseView, GpuView, JobGpusView, NodeView


def use_line(use: GpuUseView) -> str:
    """``utilisation 43% mean, 99% peak; memory 12.1 GiB mean, 30 GiB peak (4 cards)``."""
    memory, peak = render.amount("memory", use.memory), render.amount("memory", use.memory_peak)
    return (
        f"utilisation {use.utilisation:.0f}% mean, {use.utilisation_peak:.0f}% peak; "
        f"memory {memory} mean, {peak} peak ({use.cards} card{'s' if use.cards != 1 else ''}, "
        f"{render.seconds(use.end - use.start)} read)"
    )


def job_lines(gpus: JobGpusView, now: float) -> Table | Text:
    """What ``describe job`` says of the job's GPUs: the summary, its idle mark, and
    each task's latest reading."""
    if gpus.summary is None:
        return Text("no readings yet", style="dim")
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row("Use", use_line(gpus.summary))
    if gpus.idle_since is not None:
        table.add_row(
            "Idle",
            Text(
                f"every card below its queue's threshold for {render.age(gpus.idle_since, now)}",
                style="yellow",
            ),
        )
    for task in gpus.tasks:
        cards = ",".join(str(gpu) for gpu in task.gpus)
        table.add_row(
            task.task,
            f"{task.node} GPU {cards}: {task.utilisation:.0f}%, "
            f"{render.amount('memory', task.memory)} ({render.age(task.read_at, now)} ago)",
        )
    return table


def health(gpu: GpuView) -> Text:
    """``ok``, or ``cordoned (health)`` / ``cordoned (admin)``: who took the card out."""
    if gpu.cordoned is None:
        return Text("ok", style="green")
    by = "health" if gpu.cordoned_by == "health" else "admin"
    return Text(f"cordoned ({by})", style="red")


def cordon_lines(nodes: Sequence[NodeView]) -> list[Text]:
    """A line for each card out of scheduling: which, by whom, and why."""
    return [
        Text(
            f"{node.name} GPU {gpu.index} cordoned ({gpu.cordoned_by}): {gpu.cordoned}", style="red"
        )
        for node in nodes
        for gpu in node.gpus
        if gpu.cordoned is not None
    ]


def reading(gpu: GpuView) -> tuple[str, str, str, str]:
    """Utilisation, memory used/total, temperature and power, or dashes unread."""
    if gpu.utilisation is None:
        return "-", "-", "-", "-"
    used = render.amount("memory", float(gpu.memory_used or 0))
    total = render.amount("memory", float(gpu.memory_total or 0))
    return (
        f"{gpu.utilisation:.0f}%",
        f"{used}/{total}",
        f"{gpu.temperature or 0:.0f}C",
        f"{gpu.power or 0:.0f}W",
    )


def cards_table(nodes: Sequence[NodeView]) -> Table:
    """One line per card of every node: what it is given, what it does, its health."""
    table = Table(box=None, pad_edge=False)
    for title in (
        "NODE",
        "GPU",
        "MODEL",
        "GIVEN",
        "UTIL",
        "",
        "MEMORY",
        "TEMP",
        "POWER",
        "TASKS",
        "HEALTH",
    ):
        table.add_column(title, no_wrap=title not in ("TASKS", "HEALTH"), overflow="fold")
    for node in nodes:
        for gpu in node.gpus:
            util, memory, temperature, power = reading(gpu)
            tasks = ", ".join(gpu.tasks) + (f" +{gpu.other_tasks}" if gpu.other_tasks else "")
            table.add_row(
                node.name,
                str(gpu.index),
                gpu.model or "-",
                f"{gpu.used:.0%}",
                render.bar(gpu.utilisation or 0.0, 100.0, width=10),
                util,
                memory,
                temperature,
                power,
                tasks or "-",
                health(gpu),
            )
    return table


def absent_lines(nodes: Sequence[NodeView]) -> list[str]:
    """A line for each node whose GPUs are not read, saying why."""
    return [f"{n.name}: {n.gpu_readings_absent}" for n in nodes if n.gpu_readings_absent]
