"""``phalanx bench``: in-process benchmarks that print JSON."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TextIO

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from phalanx.cli.traces import resolve as resolve_traces
from phalanx.domain.errors import PhalanxError
from phalanx.policies import load_policy, policy_names

app = typer.Typer(help="Benchmarks (in-process; print JSON with --json).", no_args_is_help=True)


@app.command("engine")
def engine_bench(
    nodes: int = typer.Option(5000, min=1, help="Nodes of 16 CPU, 64 GiB, 8 GPUs."),
    queues: int = typer.Option(5, min=1),
    jobs_per_queue: int = typer.Option(80, min=0),
    tasks_per_job: int = typer.Option(125, min=1),
    gpu_mix: bool = typer.Option(False, "--gpu-mix", help="Gangs of 1/2/4/8/16/64 GPUs."),
    running: int = typer.Option(0, min=0, help="Small tasks already running (busy cluster)."),
    scheduler: str = typer.Option(
        "phalanx-default",
        help=f"A SchedulerConfig file or: {', '.join(policy_names())}.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON line."),
) -> None:
    """One full scheduling session on a generated cluster, every task pending."""
    from phalanx.benchmarks import engine  # noqa: PLC0415  (heavy: the whole engine)

    spec = engine.EngineBenchSpec(
        nodes=nodes,
        queues=queues,
        jobs_per_queue=jobs_per_queue,
        tasks_per_job=tasks_per_job,
        gpu_mix=gpu_mix,
        running=running,
    )
    try:
        policy = load_policy(scheduler)
        result = {"scheduler": policy.name, **engine.run(spec, policy.config)}
    except PhalanxError as error:
        _fail(str(error))
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(title="engine benchmark")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, str(value))
    Console().print(table)


@app.command("fgd")
def fgd_bench(
    traces_dir: Path | None = typer.Option(
        None,
        "--traces-dir",
        help="Folder holding alibaba-gpu-v2023-openb/ (default: $PHALANX_TRACES, else "
        "../shared/traces).",
    ),
    workloads: str = typer.Option(
        "default", help="openb pod lists, comma-separated: default,cpu050"
    ),
    policies: str = typer.Option(
        "random,dotprod,gpuclustering,gpupacking,bestfit,fgd,default",
        help="Comma-separated: random, dotprod, gpuclustering, gpupacking, bestfit, fgd, default.",
    ),
    seeds: str = typer.Option("42", help="Comma-separated seeds of the arrival order."),
    out: Path = typer.Option(Path("fgd-bench"), help="Folder for the CSV and the SVG chart."),
    tune: float = typer.Option(
        1.3, min=0.01, help="Arrived GPU request, as a share of the cluster's."
    ),
    limit: int | None = typer.Option(
        None,
        min=1,
        help="A subsample: at most N arrivals per run, from the first N pods of each file, "
        "on a share of the nodes they fill; marked as such, without the authors' figures.",
    ),
) -> None:
    """The FGD paper's experiment through the engine; prints JSON next to the authors' figures."""
    from phalanx.benchmarks import fgd_report  # noqa: PLC0415  (heavy: the whole engine)
    from phalanx.benchmarks.fgd import OPENB  # noqa: PLC0415

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError as error:
        raise typer.BadParameter(f"--seeds: {error}; fix: give integers like 42,43") from error
    try:
        traces = resolve_traces(traces_dir).require(OPENB + "/", holding=True)
        summary = fgd_report.bench(
            traces,
            [w.strip() for w in workloads.split(",") if w.strip()],
            [p.strip() for p in policies.split(",") if p.strip()],
            seed_list,
            out,
            tune=tune,
            limit=limit,
            progress=ProgressLine(),
        )
    except PhalanxError as error:
        _fail(str(error))
    except (ValueError, FileNotFoundError) as error:
        raise typer.BadParameter(str(error)) from error
    typer.echo(json.dumps(summary, indent=1))


class ProgressLine:
    """Progress of long runs on stderr: on a terminal one line redrawn at most twice a
    second (and its last state kept); elsewhere (a log, a pipe) a line at most every
    ``every`` seconds. Nothing in the first ``after`` seconds: short benchmarks stay quiet."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        every: float = 5.0,
        after: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = 0.5 if self.tty else every
        self.clock = clock
        self.started = clock()
        self.after = after
        self.last = -math.inf

    def __call__(self, label: str, done: int, total: int) -> None:
        now = self.clock()
        end = done >= total
        if now - self.started < self.after:
            return
        if now - self.last < self.every and not (end and self.tty):
            return
        self.last = now
        text = f"{label}: {done:,}/{total:,} pods ({100 * done / max(total, 1):.0f}%)"
        if self.tty:
            self.stream.write("\r\x1b[K" + text + ("\n" if end else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _fail(message: str) -> NoReturn:
    """One ``error:`` line on stderr, exit status 2 (as ``phalanx sim``)."""
    # The message is text, not markup: a name such as train[2] stays as written.
    Console(stderr=True).print(f"[red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(2)
