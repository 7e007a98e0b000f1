"""``phalanx sim``: replay a workload through the engine on a simulated cluster.

``run`` plays one policy; ``compare`` plays several on the same workload, one folder
each, and writes one report comparing them. Bad input (an unknown preset, a malformed
row, a broken policy file) ends with a one-line error naming the field and the fix.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from phalanx.cli import sim_pipeline, story
from phalanx.cli.traces import resolve as resolve_traces
from phalanx.domain.errors import InvalidInput, PhalanxError
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine.framework.registry import Registry
from phalanx.plugins import installed_registry
from phalanx.policies import Policy, load_policy, policy_names
from phalanx.sim.clusters import PRESETS, load_cluster
from phalanx.sim.data import DATA_FIGURES, byte_amount, parse_cache_model, with_datasets
from phalanx.sim.metrics import HEADLINE_FIGURES, USER_FIGURES
from phalanx.sim.pipeline import (
    check_replayable,
    load_timings,
    pipeline_queues,
    replay_pipeline,
)
from phalanx.sim.pipeline import summary as replay_summary
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces import DEFAULT_PATHS, load_workload
from phalanx.sim.workload import Workload
from phalanx.spec import QueueDocument, load_file, parse_duration
from phalanx.spec.pipeline import build_graph, parse_assignments, resolve

app = typer.Typer(help="Trace-driven simulation with the production engine.", no_args_is_help=True)
app.command("story")(story.story)
console = Console(stderr=True)

CLUSTER_HELP = f"A Cluster document, or a preset: {', '.join(PRESETS)}."
WORKLOAD_HELP = (
    "FORMAT:PATH (philly, openb, pollux, tiresias, synthetic, kueue, jsonl) or a .jsonl file."
)


def _needed(workload_spec: str, cluster: str) -> str | None:
    """What of the traces folder a run reads ("": the folder itself), None: nothing."""
    fmt, colon, text = workload_spec.partition(":")
    text = text.strip()
    if colon and fmt in DEFAULT_PATHS and not Path(text).expanduser().is_absolute():
        return text or DEFAULT_PATHS[fmt]
    return "" if cluster in ("philly", "openb", "tiresias") else None


def _queues(path: Path | None, workload: Workload) -> tuple[Queue, ...]:
    if path is None:
        return workload.queues
    documents = load_file(path)
    queues = tuple(d.to_domain() for d in documents if isinstance(d, QueueDocument))
    if not queues:
        raise PhalanxError(
            f"{path}: no Queue documents; fix: put `kind: Queue` documents in the --queues file"
        )
    return queues


NODE_MTBF_HELP = (
    "Mean time between failures of each node, e.g. 30d: failed nodes lose their tasks, whose "
    "jobs retry by their maxRetry (default: no node fails)."
)
# The options the commands share, declared once.
CLUSTER = typer.Option(..., help=CLUSTER_HELP)
WORKLOAD = typer.Option(..., help=WORKLOAD_HELP)
SCHEDULER = typer.Option(
    "phalanx-default", help=f"A SchedulerConfig file or: {', '.join(policy_names())}."
)
SEED = typer.Option(0, help="Seed for synthetic workloads and node failures.")
UNTIL = typer.Option(None, help="Stop the clock at this duration, e.g. 7d.")
PERIOD = typer.Option(60.0, help="Seconds between periodic scheduling sessions.")
TRACES_DIR = typer.Option(None, help="Public traces folder (default ../shared/traces).")
PROFILES = typer.Option(
    None,
    help="Application profiles of a pollux: workload (one folder per application, with "
    "placements-<gpu type>.csv curves per GPU type where measured), e.g. "
    "sia-philly/app_profiles (default: app_profiles beside the workload's folder).",
)
NODE_MTBF = typer.Option(None, help=NODE_MTBF_HELP)
NODE_MTTR = typer.Option("1h", help="Mean time to repair a failed node, e.g. 2h.")
DATASETS = typer.Option(
    0,
    min=0,
    help="Give each job that reads no dataset one of this many, the first ones the most "
    "read (Zipf, seeded by --seed); a task waits for what its node's cache lacks.",
)
DATASET_SIZE = typer.Option(
    "200Gi", help="Bytes of each dataset --datasets makes, and of any the workload leaves unsized."
)
NODE_CACHE = typer.Option(
    "2Ti",
    help="Each node's dataset cache: least recently used evicted from 95% full to 80%, "
    "never what a task there reads.",
)
NODE_BANDWIDTH = typer.Option(
    "1G", help="Bytes/s each node reads datasets from the store at (its fills take turns)."
)
FAIRNESS_WINDOW = typer.Option(
    "1d",
    help="Window of simulated time over which Jain's index between users is taken (users' "
    "GPU-time against their max-min fair share), e.g. 6h.",
)
PER_USER = typer.Option(
    False, "--per-user", help="Also print a table of per-user figures for each scheduler."
)
FIXED_PERIOD = typer.Option(
    False,
    "--fixed-period",
    help="Sessions only every --period seconds, as Pollux's simulator schedules (default: "
    "also a second after each arrival or release).",
)


def _play(
    policy: Policy,
    workload: Workload,
    nodes: Sequence[Node],
    queues: tuple[Queue, ...],
    options: SimOptions,
    out: Path,
    registry: Registry,
    fairness_window: float,
) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    options = replace(options, oracle_runtime=policy.oracle_runtime)
    jobs = len(workload.jobs)
    with (
        (out / "events.jsonl").open("w", encoding="utf-8") as events,
        Progress(
            TextColumn(f"[bold]{policy.name}"),
            BarColumn(),
            TextColumn(f"{{task.completed:,.0f}}/{jobs:,} jobs finished"),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress,  # one bar per policy, left in place when it ends
    ):
        bar = progress.add_task("", total=max(jobs, 1))

        def tick(now: float, finished: int) -> None:
            progress.update(bar, completed=finished, description=f"at {_sim_clock(now)}")

        simulation = Simulation(
            nodes,
            workload,
            policy.config,
            queues=queues,
            options=options,
            events_out=events,
            registry=registry,
        )
        metrics = simulation.run(progress=tick)
        finished = sum(record.outcome == "finished" for record in metrics.jobs.values())
        tick(metrics.end_time, finished)
    summary = {
        "policy": policy.name,
        "total_gpus": metrics.total_gpus,
        **metrics.summary(sim_wall_s=simulation.wall_seconds, fairness_window=fairness_window),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    _write_jobs(out / "jobs.csv", metrics.per_job())
    return summary


def _sim_clock(seconds: float) -> str:
    """Simulated time for a progress line: ``day 3 07:12``."""
    day, rest = divmod(int(seconds), 86_400)
    return f"day {day} {rest // 3600:02d}:{rest % 3600 // 60:02d}"


def _write_jobs(path: Path, rows: list[dict[str, object]]) -> None:
    """Per-job figures, one CSV row per job (empty cells where a job never started or ended)."""
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]) if rows else ["job"])
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Replay:
    """What ``run`` and ``compare`` share: the options of one replay, as typer parsed them."""

    cluster: str
    workload: str
    out: Path
    queues: Path | None
    seed: int
    until: str | None
    period: float
    traces_dir: Path | None
    profiles: Path | None
    node_mtbf: str | None
    node_mttr: str
    fixed_period: bool
    as_json: bool
    datasets: int
    dataset_size: str
    node_cache: str
    node_bandwidth: str
    fairness_window: str
    per_user: bool

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> _Replay:
        """The replay a command's parsed parameters (``ctx.params``) describe."""
        return cls(**{field.name: params[field.name] for field in fields(cls)})


def _simulate(schedulers: list[str], replay: _Replay, *, nested: bool, title: str) -> None:
    """Play each scheduler (in its own folder when ``nested``), render the report, and
    print the summaries: a JSON object (a list when ``nested``) or a table."""
    results = _run_all(schedulers, replay, nested)
    _render(results, replay.out, title)
    if replay.as_json:
        summaries = [summary for _, summary in results]
        typer.echo(json.dumps(summaries if nested else summaries[0]))
    else:
        printer = Console()
        printer.print(_table(results))
        if replay.per_user:
            for _, summary in results:
                printer.print(_user_table(summary))


def _run_all(
    schedulers: list[str], replay: _Replay, nested: bool
) -> list[tuple[Path, dict[str, object]]]:
    workload_spec, cluster, out = replay.workload, replay.cluster, replay.out
    traces = resolve_traces(replay.traces_dir)
    needed = _needed(workload_spec, cluster)
    if needed is not None:
        traces.require(needed)
    folder = traces.path if traces.exists() else None
    horizon = parse_duration(replay.until) if replay.until else None
    mtbf = parse_duration(replay.node_mtbf) if replay.node_mtbf else None
    mttr = parse_duration(replay.node_mttr)
    with _option("--fairness-window", replay.fairness_window):
        window = parse_duration(replay.fairness_window)
    registry = installed_registry()
    policies = [load_policy(s) for s in schedulers]
    for policy in policies:
        registry.check(policy.config)
    with _option("--workload", workload_spec), console.status(f"reading {workload_spec} ..."):
        workload = load_workload(
            workload_spec,
            traces_dir=folder,
            seed=replay.seed,
            until=horizon,
            profiles_dir=replay.profiles.expanduser() if replay.profiles else None,
        )
    size = int(byte_amount(replay.dataset_size, option="--dataset-size"))
    workload = with_datasets(workload, count=replay.datasets, size=size, seed=replay.seed)
    with _option("--cluster", cluster):
        nodes = load_cluster(cluster, traces_dir=folder)
    with _option("--queues", str(replay.queues)):
        queues = _queues(replay.queues, workload)
    options = SimOptions(
        seed=replay.seed,
        until=horizon,
        period=replay.period,
        node_mtbf=mtbf,
        node_mttr=mttr,
        fixed_period=replay.fixed_period,
        data=parse_cache_model(replay.node_cache, replay.node_bandwidth),
    )
    console.print(f"{len(workload.jobs)} jobs on {len(nodes)} nodes, {len(queues)} queues")
    results = []
    for policy in policies:
        folder = out / policy.name if nested else out
        summary = _play(policy, workload, nodes, queues, options, folder, registry, window)
        results.append((folder, summary))
    return results


def _workload_label(spec: str) -> str:
    """``tiresias (tiresias-sample/60_job.csv)`` for ``tiresias:``, ``synthetic`` for
    ``synthetic:``; a spec with a path as written."""
    fmt, colon, text = spec.partition(":")
    if not colon or text.strip():
        return spec
    default = DEFAULT_PATHS.get(fmt)
    return f"{fmt} ({default})" if default else fmt


@contextmanager
def _option(name: str, value: str) -> Iterator[None]:
    """Errors of loading an option's value start with the option and its value."""
    try:
        yield
    except InvalidInput as error:
        raise InvalidInput(f"{name} {value}: {error}") from None


def _render(results: list[tuple[Path, dict[str, object]]], out: Path, title: str) -> None:
    from phalanx.sim.report import render_report  # noqa: PLC0415  (heavy only when used)

    with console.status("writing the report ..."):
        render_report([folder for folder, _ in results], out / "report.html", title=title)
    console.print(f"report: {out / 'report.html'}")


def _table(results: list[tuple[Path, dict[str, object]]]) -> Table:
    table = Table(title="simulation summary")
    table.add_column("figure")
    for _, summary in results:
        table.add_column(str(summary["policy"]), justify="right")
    shown = [key for key in DATA_FIGURES if any(key in summary for _, summary in results)]
    for key in (*HEADLINE_FIGURES, *shown):
        table.add_row(key, *(str(summary.get(key)) for _, summary in results))
    table.add_section()  # fairness between users: n/a where the workload has one user
    for key in USER_FIGURES:
        table.add_row(key, *(_cell(summary.get(key)) for _, summary in results))
    return table


def _cell(value: object) -> str:
    return "n/a" if value is None else str(value)


#: Columns of the per-user table: (per-user key, heading).
_USER_COLUMNS = (
    ("jobs", "jobs"),
    ("finished", "finished"),
    ("avg_jct_s", "avg JCT s"),
    ("avg_wait_s", "avg wait s"),
    ("starvation_s", "max wait s"),
    ("gpu_time_s", "GPU-h"),
)
#: Rows of the per-user table: the users with the most GPU-time (summary.json has all).
_USER_ROWS = 20


def _user_table(summary: Mapping[str, object]) -> Table:
    """One row per user, most GPU-time first: jobs, mean JCT (n/a with none finished),
    mean and longest wait (never-started jobs waiting until the end), GPU-hours."""
    rows = summary.get("per_user")
    users = sorted(
        (rows if isinstance(rows, dict) else {}).items(),
        key=lambda item: (-float(item[1]["gpu_time_s"]), item[0]),
    )
    shown = f"the {_USER_ROWS} with the most GPU-time of {len(users)}"
    table = Table(
        title=f"per user: {escape(str(summary.get('policy')))}",
        caption=shown + " (all in summary.json)" if len(users) > _USER_ROWS else None,
    )
    table.add_column("user")
    for _, heading in _USER_COLUMNS:
        table.add_column(heading, justify="right")
    for user, row in users[:_USER_ROWS]:
        cells = {key: row.get(key) for key, _ in _USER_COLUMNS}
        cells["gpu_time_s"] = round(float(row["gpu_time_s"]) / 3600.0, 1)
        if not row.get("finished"):
            cells["avg_jct_s"] = None
        table.add_row(escape(str(user)), *(_cell(cells[key]) for key, _ in _USER_COLUMNS))
    return table


def _guarded(fn: object) -> None:
    try:
        fn()  # type: ignore[operator]
    except PhalanxError as error:
        text = escape(str(error))  # a unit's name (train[2]) is not markup
        console.print(f"[red]error:[/] {text}", soft_wrap=True, markup=True, highlight=False)
        raise typer.Exit(2) from None


@app.command("run")
def run(
    ctx: typer.Context,
    cluster: str = CLUSTER,
    workload: str = WORKLOAD,
    scheduler: str = SCHEDULER,
    out: Path = typer.Option(..., help="Folder for summary.json, events.jsonl and report.html."),
    queues: Path | None = typer.Option(
        None, help="Queue documents (multi-document YAML) replacing the workload's."
    ),
    seed: int = SEED,
    until: str | None = UNTIL,
    period: float = PERIOD,
    traces_dir: Path | None = TRACES_DIR,
    profiles: Path | None = PROFILES,
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
    node_mtbf: str | None = NODE_MTBF,
    node_mttr: str = NODE_MTTR,
    fixed_period: bool = FIXED_PERIOD,
    datasets: int = DATASETS,
    dataset_size: str = DATASET_SIZE,
    node_cache: str = NODE_CACHE,
    node_bandwidth: str = NODE_BANDWIDTH,
    fairness_window: str = FAIRNESS_WINDOW,
    per_user: bool = PER_USER,
) -> None:
    """Replay WORKLOAD on CLUSTER with one scheduler; write summary, events and a report."""
    title = f"phalanx sim: {scheduler} on {_workload_label(workload)}"
    _guarded(lambda: _simulate([scheduler], _Replay.of(ctx.params), nested=False, title=title))


@app.command("compare")
def compare(
    ctx: typer.Context,
    cluster: str = CLUSTER,
    workload: str = WORKLOAD,
    scheduler: list[str] = typer.Option(
        ..., help="Repeat: each policy name or SchedulerConfig file."
    ),
    out: Path = typer.Option(..., help="Folder: one subfolder per scheduler, plus report.html."),
    queues: Path | None = typer.Option(None, help="Queue documents replacing the workload's."),
    seed: int = SEED,
    until: str | None = UNTIL,
    period: float = PERIOD,
    traces_dir: Path | None = TRACES_DIR,
    profiles: Path | None = PROFILES,
    as_json: bool = typer.Option(False, "--json", help="Print the summaries as a JSON list."),
    node_mtbf: str | None = NODE_MTBF,
    node_mttr: str = NODE_MTTR,
    fixed_period: bool = FIXED_PERIOD,
    datasets: int = DATASETS,
    dataset_size: str = DATASET_SIZE,
    node_cache: str = NODE_CACHE,
    node_bandwidth: str = NODE_BANDWIDTH,
    fairness_window: str = FAIRNESS_WINDOW,
    per_user: bool = PER_USER,
) -> None:
    """Replay WORKLOAD under several schedulers side by side; one report compares them."""
    title = f"phalanx sim compare on {_workload_label(workload)}"
    _guarded(lambda: _simulate(scheduler, _Replay.of(ctx.params), nested=True, title=title))


DURATIONS_HELP = (
    "YAML/JSON mapping each step (or one foreach item, STEP[i]) to its duration (90, 5m, 2h) "
    "or {duration, outputs: {PARAM: value}, failures: N}."
)


@app.command("pipeline")
def pipeline(
    file: Path = typer.Argument(
        ..., help="A file with one Pipeline document (Queue documents in it are its queues)."
    ),
    durations: Path = typer.Option(..., help=DURATIONS_HELP),
    cluster: str = CLUSTER,
    param: list[str] = typer.Option([], "--param", "-p", help="A param: name=value. Repeatable."),
    runs: int = typer.Option(1, min=1, max=10_000, help="How many runs of the pipeline."),
    interval: str = typer.Option("0", help="Between two runs' arrivals: seconds, or 5m, 1h."),
    queues: Path | None = typer.Option(
        None, help="Queue documents (quotas) replacing the file's; default: one per step queue."
    ),
    scheduler: str = SCHEDULER,
    out: Path | None = typer.Option(None, help="Folder for summary.json, events.jsonl, jobs.csv."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
    period: float = PERIOD,
    session_delay: float = typer.Option(
        0.0, min=0.0, help="Seconds from a job's arrival or end to the session that sees it."
    ),
) -> None:
    """Replay runs of a pipeline: each step a job when its dependencies end, on CLUSTER."""

    def go() -> None:
        document, file_queues = sim_pipeline.pipeline_file(file)
        graph = build_graph(document.spec)
        check_replayable(graph)
        with _option("--param", " ".join(param)):
            params = resolve(document.spec.declared_params(), parse_assignments(param))
        timings = load_timings(durations, graph)
        with _option("--cluster", cluster):
            nodes = load_cluster(cluster)
        with _option("--queues", str(queues)):
            given = _queues(queues, Workload(jobs=(), queues=file_queues))
        with _option("--interval", interval):
            interval_s = sim_pipeline.seconds(interval)
        registry = installed_registry()
        policy = load_policy(scheduler)
        registry.check(policy.config)
        options = SimOptions(
            period=period, trigger_delay=session_delay, oracle_runtime=policy.oracle_runtime
        )
        with sim_pipeline.events_file(out) as events:
            replay = replay_pipeline(
                graph,
                timings,
                name=document.metadata.name,
                nodes=nodes,
                queues=pipeline_queues(graph, given),
                config=policy.config,
                params=params,
                runs=runs,
                interval=interval_s,
                options=options,
                registry=registry,
                events_out=events,
            )
        result = replay_summary(replay)
        if out is not None:
            (out / "summary.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            _write_jobs(out / "jobs.csv", replay.metrics.per_job())
        if as_json:
            typer.echo(json.dumps(result))
            return
        printer = Console()
        for table in sim_pipeline.tables(result):
            printer.print(table)

    _guarded(go)
