"""``phalanx bench``: in-process benchmarks that print JSON."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from phalanx.benchmarks import engine

app = typer.Typer(help="Benchmarks (in-process; print JSON with --json).", no_args_is_help=True)


@app.command("engine")
def engine_bench(
    nodes: int = typer.Option(5000, min=1, help="Nodes of 16 CPU, 64 GiB, 8 GPUs."),
    queues: int = typer.Option(5, min=1),
    jobs_per_queue: int = typer.Option(80, min=0),
    tasks_per_job: int = typer.Option(125, min=1),
    gpu_mix: bool = typer.Option(False, "--gpu-mix", help="Gangs of 1/2/4/8/16/64 GPUs."),
    running: int = typer.Option(0, min=0, help="Small tasks already running (busy cluster)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON line."),
) -> None:
    """One full scheduling session on a generated cluster, every task pending."""
    spec = engine.EngineBenchSpec(
        nodes=nodes,
        queues=queues,
        jobs_per_queue=jobs_per_queue,
        tasks_per_job=tasks_per_job,
        gpu_mix=gpu_mix,
        running=running,
    )
    result = engine.run(spec)
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(title="engine benchmark")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, str(value))
    Console().print(table)
