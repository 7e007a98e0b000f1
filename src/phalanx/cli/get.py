"""``phalanx get jobs|queues|nodes|runs|pipelines|models|inferences|secrets|datasets|tunings [NAME]`` and ``phalanx get tasks JOB``:
list what the server holds.

A Rich table for people (``-o wide`` adds columns); ``-o json`` and ``-o yaml`` print the
API's objects (a list, or one object when NAME is given) and nothing else on stdout.
``get jobs -w`` and ``get runs -w`` (``--watch``) go on printing rows as they change,
until Ctrl-C (``cli.watch``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import typer

from phalanx.cli import datasets, inferences, models, render, secrets, tunings
from phalanx.cli.remote import OUTPUT_OPTION, Output, connect, emit, fail, machine, print_table
from phalanx.cli.watch import watch
from phalanx.client import ClientError, JobSummaryView, RunView, UserView
from phalanx.domain.job import JobPhase, TaskPhase

V = TypeVar("V", JobSummaryView, RunView)

app = typer.Typer(
    help="List jobs, tasks, queues, nodes, runs, pipelines, models, inferences, secrets, "
    "datasets or tunings "
    "(each kind singular or plural).",
    no_args_is_help=True,
)

WATCH_OPTION = typer.Option(
    False,
    "--watch",
    "-w",
    help="After the listing, print a row again whenever it changes (polled every "
    "second; a deleted one once more as Deleted), until Ctrl-C.",
)


@app.command("jobs")
def get_jobs(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One job."),
    output: Output | None = OUTPUT_OPTION,
    queue: str | None = typer.Option(None, "--queue", help="Only jobs of this queue."),
    phase: list[str] | None = typer.Option(
        None, "--phase", help="Only jobs in this phase (repeatable), e.g. Running."
    ),
    user: str | None = typer.Option(None, "--user", help="Only this user's jobs (admins)."),
    all_users: bool = typer.Option(
        False, "--all-users", "-A", help="Every user's jobs (admins); default: your own."
    ),
    watching: bool = WATCH_OPTION,
) -> None:
    """Jobs, oldest first: your own unless --all-users or --user."""
    phases = [_phase(p) for p in phase or ()]
    with connect(ctx) as client:
        if name is None:
            user = _whose(client.whoami(), user, all_users=all_users)

        def read() -> list[JobSummaryView]:
            if name is None:
                return client.jobs(queue=queue, phase=phases or None, user=user)
            return [client.job(name)]

        jobs = read()  # a NAME that is not a job's is an error here, watched or not
        if watching:
            wide = output is Output.WIDE
            watch(
                lambda: _gone_is_none(read),
                jobs,
                key=lambda job: job.name,
                table=lambda views, now: render.jobs_table(views, now, wide=wide),
                output=output,
                empty="no jobs",
            )
    if machine(output):
        assert output is not None
        emit(jobs[0] if name is not None else jobs, output)
    elif not jobs:
        typer.echo("no jobs", err=True)
    else:
        print_table(render.jobs_table(jobs, time.time(), wide=output is Output.WIDE))


@app.command("tasks")
def get_tasks(
    ctx: typer.Context,
    job: str = typer.Argument(..., help="The job."),
    output: Output | None = OUTPUT_OPTION,
    phase: list[str] | None = typer.Option(
        None, "--phase", help="Only tasks in this phase (repeatable), e.g. Failed."
    ),
) -> None:
    """Every task of a job, in order (however many: they are read page by page)."""
    phases = [_task_phase(p) for p in phase or ()]
    with connect(ctx) as client:
        tasks = client.tasks(job, phase=phases or None)
    if machine(output):
        assert output is not None
        emit(tasks, output)
    elif not tasks:
        typer.echo(
            f"job {job} has no tasks{' in ' + ', '.join(phases) if phases else ''}", err=True
        )
    else:
        print_table(render.tasks_table(tasks))


@app.command("queues")
def get_queues(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One queue."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Queues, by name, with GPUs allocated against their share and cap."""
    with connect(ctx) as client:
        queues = [client.queue(name)] if name is not None else client.queues()
    if machine(output):
        assert output is not None
        emit(queues[0] if name is not None else queues, output)
    elif not queues:
        typer.echo("no queues: create one with phalanx apply -f queue.yaml", err=True)
    else:
        print_table(render.queues_table(queues, wide=output is Output.WIDE))


@app.command("nodes")
def get_nodes(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One node."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Nodes with their GPUs (one block per card), CPU and memory in use."""
    with connect(ctx) as client:
        nodes = [client.node(name)] if name is not None else client.nodes()
    if machine(output):
        assert output is not None
        emit(nodes[0] if name is not None else nodes, output)
    else:
        print_table(render.nodes_table(nodes, wide=output is Output.WIDE))


def _gone_is_none(read: Callable[[], list[V]]) -> list[V]:
    """What ``read()`` gives, or nothing once the one object it reads is gone (deleted
    while watched)."""
    try:
        return read()
    except ClientError as error:
        if error.status == 404:
            return []
        raise


def _whose(me: UserView, user: str | None, *, all_users: bool) -> str | None:
    """The user whose jobs to list (None: everyone's). A user who is not an admin sees
    their own jobs only, whatever they ask: a note on stderr says so."""
    if me.role != "admin" and (all_users or (user is not None and user != me.name)):
        asked = "--all-users" if all_users else f"--user {user}"
        typer.echo(f"note: {asked} is for admins; you ({me.name}) see your own jobs only", err=True)
        return me.name
    if user is None and not all_users:
        return me.name
    return user


def _task_phase(text: str) -> str:
    found = {p.value.lower(): p.value for p in TaskPhase}.get(text.strip().lower())
    if found is None:
        fail(f"--phase: {text!r} is not a task phase; fix: use one of {', '.join(TaskPhase)}")
    return found


def _phase(text: str) -> str:
    found = {p.value.lower(): p.value for p in JobPhase}.get(text.strip().lower())
    if found is None:
        fail(f"--phase: {text!r} is not a job phase; fix: use one of {', '.join(JobPhase)}")
    return found


@app.command("runs")
def get_runs(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(None, help="One run."),
    output: Output | None = OUTPUT_OPTION,
    pipeline: str | None = typer.Option(None, "--pipeline", help="Only runs of this pipeline."),
    watching: bool = WATCH_OPTION,
) -> None:
    """Runs of pipelines, oldest first: your own (admins: everyone's)."""
    with connect(ctx) as client:

        def read() -> list[RunView]:
            return [client.run(run_id)] if run_id is not None else client.runs(pipeline=pipeline)

        runs = read()  # a RUN that is not a run's is an error here, watched or not
        if watching:
            watch(
                lambda: _gone_is_none(read),
                runs,
                key=lambda run: run.id,
                table=render.runs_table,
                output=output,
                empty="no runs",
            )
    if machine(output):
        assert output is not None
        emit(runs[0] if run_id is not None else runs, output)
    elif not runs:
        typer.echo("no runs: start one with phalanx pipeline run NAME", err=True)
    else:
        print_table(render.runs_table(runs, time.time()))


@app.command("pipelines")
def get_pipelines(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One pipeline."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Registered pipelines, by name."""
    with connect(ctx) as client:
        pipelines = [client.pipeline(name)] if name is not None else client.pipelines()
    if machine(output):
        assert output is not None
        emit(pipelines[0] if name is not None else pipelines, output)
    elif not pipelines:
        typer.echo("no pipelines: register one with phalanx apply -f pipeline.yaml", err=True)
    else:
        print_table(render.pipelines_table(pipelines, time.time()))


@app.command("models")
def get_models(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One model: its versions."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Models by name with their newest version; with NAME, that model's versions."""
    with connect(ctx) as client:
        if name is None:
            listed = client.models()
            table = models.models_table(listed, time.time())
        else:
            versions = client.model_versions(name)
            table = models.versions_table(versions, time.time())
    if machine(output):
        assert output is not None
        emit(listed if name is None else versions, output)
    elif name is None and not listed:
        typer.echo(
            "no models: a job role or pipeline step with model: {name, path} registers one "
            "when it succeeds",
            err=True,
        )
    else:
        print_table(table)


@app.command("inferences")
def get_inferences(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One service."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Inference services: each predictor's model version, traffic share and Ready
    replicas, and the path the gateway serves it at."""
    with connect(ctx) as client:
        listed = client.inferences() if name is None else [client.inference(name)]
    if machine(output):
        assert output is not None
        emit(listed if name is None else listed[0], output)
    elif not listed:
        typer.echo("no inference services: apply an Inference document", err=True)
    else:
        print_table(inferences.inferences_table(listed, time.time()))


@app.command("secrets")
def get_secrets(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One secret."),
    output: Output | None = OUTPUT_OPTION,
    user: str | None = typer.Option(None, "--user", help="With NAME: that user's (admins)."),
) -> None:
    """Your secrets (an admin's: everyone's): key names and sizes, never values."""
    with connect(ctx) as client:
        listed = client.secrets() if name is None else [client.secret(name, user=user)]
    if machine(output):
        assert output is not None
        emit(listed if name is None else listed[0], output)
    elif not listed:
        typer.echo("no secrets: create one with phalanx secret create NAME", err=True)
    else:
        print_table(secrets.secrets_table(listed, time.time()))


@app.command("datasets")
def get_datasets(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One dataset."),
    output: Output | None = OUTPUT_OPTION,
    user: str | None = typer.Option(None, "--user", help="With NAME: that user's (admins)."),
) -> None:
    """Your datasets (an admin's: everyone's): phase, files and size of the last listing,
    and where the data lives."""
    with connect(ctx) as client:
        listed = client.datasets() if name is None else [client.dataset(name, user=user)]
    if machine(output):
        assert output is not None
        emit(listed if name is None else listed[0], output)
    elif not listed:
        typer.echo("no datasets: create one with phalanx apply -f DATASET.yaml", err=True)
    else:
        print_table(datasets.datasets_table(listed, time.time()))


@app.command("tunings")
def get_tunings(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One tuning."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Your tunings (an admin's: everyone's): the service each tunes, its phase, trials,
    and the best spec so far."""
    with connect(ctx) as client:
        listed = client.tunings() if name is None else [client.tuning(name)]
    if machine(output):
        assert output is not None
        emit(listed if name is None else listed[0], output)
    elif not listed:
        typer.echo("no tunings: start one with phalanx tune -f TUNING.yaml", err=True)
    else:
        print_table(tunings.tunings_table(listed, time.time()))


# kubectl's rule: a kind is named singular or plural alike.
app.command("job", hidden=True)(get_jobs)
app.command("task", hidden=True)(get_tasks)
app.command("queue", hidden=True)(get_queues)
app.command("node", hidden=True)(get_nodes)
app.command("run", hidden=True)(get_runs)
app.command("pipeline", hidden=True)(get_pipelines)
app.command("model", hidden=True)(get_models)
app.command("inference", hidden=True)(get_inferences)
app.command("secret", hidden=True)(get_secrets)
app.command("dataset", hidden=True)(get_datasets)
app.command("tuning", hidden=True)(get_tunings)
