"""``phalanx top nodes|gpus|queues``: a live view that redraws every few seconds.

``--once`` draws one frame and exits (for scripts and tests), ``--frames N`` N frames.
On a terminal the view is redrawn in place; into a file or a pipe every frame is
printed after the previous one. Ctrl-C ends the view
quietly; a server that goes away ends it with the usual one-line error.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from datetime import datetime

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from phalanx.cli import gpus as gpu_lines
from phalanx.cli import render
from phalanx.cli.remote import connect, console, print_table
from phalanx.client import Client

app = typer.Typer(
    help="Live views of GPU use by node or queue (bare: by node, as top nodes).",
    invoke_without_command=True,
)

ONCE = typer.Option(False, "--once", help="Print one frame and exit.")
INTERVAL = typer.Option(2.0, "--interval", min=0.2, help="Seconds between frames.")
FRAMES = typer.Option(
    None, "--frames", "-n", min=1, help="Print this many frames, then exit (default: until Ctrl-C)."
)


@app.callback()
def top(ctx: typer.Context) -> None:
    """Live views of GPU use by node or queue; bare ``phalanx top`` is ``top nodes``."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(top_nodes, ctx=ctx, once=False, interval=2.0, frames=None)


@app.command("nodes")
def top_nodes(
    ctx: typer.Context, once: bool = ONCE, interval: float = INTERVAL, frames: int | None = FRAMES
) -> None:
    """Every node's GPUs (one bar per node, one block per card), CPU and memory."""
    with connect(ctx) as client:
        _show(lambda: nodes_frame(client), frames=1 if once else frames, interval=interval)


@app.command("gpus")
def top_gpus(
    ctx: typer.Context, once: bool = ONCE, interval: float = INTERVAL, frames: int | None = FRAMES
) -> None:
    """Every card of every node, a line each: what it is given, what it does (utilisation,
    memory, temperature, power at its node's latest reading), its tasks and its health."""
    with connect(ctx) as client:
        _show(lambda: gpus_frame(client), frames=1 if once else frames, interval=interval)


@app.command("queues")
def top_queues(
    ctx: typer.Context, once: bool = ONCE, interval: float = INTERVAL, frames: int | None = FRAMES
) -> None:
    """Every queue's GPUs against its deserved share, and its jobs."""
    with connect(ctx) as client:
        _show(lambda: queues_frame(client), frames=1 if once else frames, interval=interval)


def _show(frame: Callable[[], RenderableType], *, frames: int | None, interval: float) -> None:
    """Draw ``frames`` frames (None: until Ctrl-C), ``interval`` seconds apart: redrawn in
    place on a terminal, printed one after the other (a blank line between) elsewhere,
    as into a file or a pipe, where a live redraw would print nothing."""
    out = console()
    try:
        if frames == 1 or not out.is_terminal:
            for shown in itertools.count(1):
                print_table(frame())
                sys.stdout.flush()
                if frames is not None and shown >= frames:
                    return
                time.sleep(interval)
                typer.echo("")
        with Live(frame(), console=out, auto_refresh=False) as live:
            for _ in itertools.count(1) if frames is None else range(frames - 1):
                time.sleep(interval)
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        return


def nodes_frame(client: Client) -> RenderableType:
    """One frame of ``top nodes``."""
    nodes = client.nodes()
    table = Table(box=None, pad_edge=False)
    for title in ("NODE", "STATUS", "CARDS", "GPU", "", "CPU", "", "MEMORY", "", "TASKS"):
        table.add_column(title, no_wrap=True)
    used_total = cards_total = 0.0
    for node in nodes:
        used = sum(gpu.used for gpu in node.gpus)
        used_total += used
        cards_total += len(node.gpus)
        cpu = (node.allocated.get("cpu", 0.0), node.capacity.get("cpu", 0.0))
        memory = (node.allocated.get("memory", 0.0), node.capacity.get("memory", 0.0))
        table.add_row(
            node.name,
            render.node_status(node),
            render.cards([gpu.used for gpu in node.gpus]),
            render.bar(used, len(node.gpus), width=12),
            f"{used:g}/{len(node.gpus)}",
            render.bar(*cpu, width=10),
            f"{render.amount('cpu', cpu[0])}/{render.amount('cpu', cpu[1])}",
            render.bar(*memory, width=10),
            f"{render.amount('memory', memory[0])}/{render.amount('memory', memory[1])}",
            str(node.tasks),
        )
    header = _header(client, f"{len(nodes)} node(s), GPUs {used_total:g}/{cards_total:g} in use")
    return Group(header, table)


def gpus_frame(client: Client) -> RenderableType:
    """One frame of ``top gpus``."""
    nodes = client.nodes()
    cards = [gpu for node in nodes for gpu in node.gpus]
    read = [gpu.utilisation for gpu in cards if gpu.utilisation is not None]
    mean = f", {sum(read) / len(read):.0f}% busy on average" if read else ""
    out = sum(1 for gpu in cards if gpu.cordoned is not None)
    summary = f"{len(cards)} GPU(s){mean}" + (f", {out} cordoned" if out else "")
    parts: list[RenderableType] = [_header(client, summary), gpu_lines.cards_table(nodes)]
    parts += gpu_lines.cordon_lines(nodes)
    parts += [Text(f"not read: {line}", style="dim") for line in gpu_lines.absent_lines(nodes)]
    return Group(*parts)


def queues_frame(client: Client) -> RenderableType:
    """One frame of ``top queues``."""
    queues = client.queues()
    table = Table(box=None, pad_edge=False)
    for title in ("QUEUE", "GPU vs DESERVED", "", "CAP", "CPU", "MEMORY", "RUNNING", "PENDING"):
        table.add_column(title, no_wrap=True)
    for queue in queues:
        gpus = queue.allocated.get("gpu", 0.0)
        deserved = queue.deserved.get("gpu", 0.0)
        table.add_row(
            queue.name,
            render.bar(gpus, deserved, width=16),
            f"{gpus:g}/{deserved:g}",
            render.amount("gpu", queue.capability["gpu"]) if "gpu" in queue.capability else "-",
            render.amount("cpu", queue.allocated.get("cpu", 0.0)),
            render.amount("memory", queue.allocated.get("memory", 0.0)),
            str(queue.jobs.get("Running", 0)),
            str(queue.jobs.get("Pending", 0) + queue.jobs.get("Queued", 0)),
        )
    return Group(_header(client, f"{len(queues)} queue(s)"), table)


def _header(client: Client, summary: str) -> Text:
    text = Text(f"phalanx {client.server}  ", style="bold")
    text.append(datetime.now().strftime("%H:%M:%S"), style="dim")
    text.append(f"  {summary}")
    return text


# kubectl's rule: a kind is named singular or plural alike.
app.command("node", hidden=True)(top_nodes)
app.command("queue", hidden=True)(top_queues)
app.command("gpu", hidden=True)(top_gpus)
