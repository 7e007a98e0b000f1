"""``phalanx describe job|queue|node|run|model|inference|secret|dataset|tuning NAME``: one object in detail, for people.

A run shows its steps (state, job, duration); a job shows its tasks (node, GPUs, exit code), why it waits when it waits, and its
events; a queue its quotas against what it holds; a node each GPU as a bar; a model
version its lineage and files; a secret its key names and size, never a value; a
dataset its source, last listing and each node's cache; a tuning its objective, best
spec and every trial.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from phalanx.cli import datasets, inferences, models, render, secrets, tunings
from phalanx.cli import gpus as gpu_lines
from phalanx.cli.remote import connect, console, print_table, reported
from phalanx.cli.rollout import step_line
from phalanx.client import EventView, GpuView, JobView, NodeView, QueueView, WhyView
from phalanx.domain.resources import Resources
from phalanx.spec.queue import QueueDocument, limits_summary

app = typer.Typer(
    help="Show one job, run, queue, node, model, inference service, secret, dataset or tuning in "
    "detail (each kind singular or plural).",
    no_args_is_help=True,
)

_WAITING = ("Pending", "Queued")


@app.command("run")
def describe_run(ctx: typer.Context, run_id: str = typer.Argument(..., help="The run.")) -> None:
    """A run: its pipeline, params and phase, then every step (foreach items one by one)
    in graph order with its phase, attempt, job and duration, then each step's reason."""
    with connect(ctx) as client:
        run = client.run(run_id)
    out = console()
    now = time.time()
    fields: dict[str, str | Text] = {
        "Run": run.id,
        "Pipeline": run.pipeline,
        "User": run.user,
        "Phase": render.phase(run.phase),
        "Params": ", ".join(f"{k}={v}" for k, v in run.params.items()) or "-",
        "Created": _clock(run.created_at),
        "Duration": render.seconds((run.finished_at or now) - run.created_at),
    }
    if run.resumed_from:
        fields["Resumes"] = run.resumed_from
    if run.parent:
        fields["Parent"] = f"{run.parent} (a sub-pipeline step of it started this run)"
    if run.scheduled_at is not None:
        fields["Scheduled"] = f"for {_clock(run.scheduled_at)} by the pipeline's schedule"
    if run.cache != "use":
        fields["Cache"] = "off" if run.cache == "off" else "refresh (not read, written anew)"
    if run.stop_requested:
        fields["Stop"] = "requested"
    if run.message:
        fields["Message"] = run.message
    out.print(_fields(fields))
    out.print(Text("\nSteps", style="bold"))
    print_table(render.steps_table(run.steps, now))  # at its natural width, as get does
    reasons = render.step_reasons(run.steps, now)
    if reasons is not None:
        out.print(Text("\nReasons", style="bold"))
        out.print(reasons)  # wrapped to the terminal's width (80 columns for a pipe)
    outputs = [
        (step.unit, name, value) for step in run.steps for name, value in step.outputs.items()
    ]
    if outputs:
        out.print(Text("\nOutputs", style="bold"))
        table = Table(box=None, pad_edge=False)
        for title in ("STEP", "OUTPUT", "VALUE"):
            table.add_column(title, overflow="fold")
        for unit, name, value in outputs:
            table.add_row(unit, name, json.dumps(value) if not isinstance(value, str) else value)
        print_table(table)


@app.command("job")
def describe_job(ctx: typer.Context, name: str = typer.Argument(..., help="The job.")) -> None:
    """A job: its roles, tasks with nodes and GPUs, why it waits, and its events."""
    with connect(ctx) as client:
        job = client.job(name)
        events = client.events(name)
        why = client.why(name) if job.phase in _WAITING else None
        gpus = client.job_gpus(name) if any(t.gpus for t in job.tasks) else None
    out = console()
    now = time.time()
    out.print(_fields(_job_fields(job, now)))
    roles = _roles(job.document)
    if roles:
        out.print(Text("\nRoles", style="bold"))
        out.print(roles)
    out.print(Text("\nTasks", style="bold"))
    out.print(render.tasks_table(job.tasks))
    if job.tasks_omitted:
        out.print(
            Text(
                f"... and {job.tasks_omitted:,} more; every task: phalanx get tasks {job.name}",
                style="dim",
            )
        )
    if gpus is not None:
        out.print(Text("\nGPUs", style="bold"))
        out.print(gpu_lines.job_lines(gpus, now))
    if why is not None:
        out.print(Text("\nWhy pending", style="bold"))
        out.print(_why(why))
    sizes = [e for e in events if e.kind == "Resized"]  # the elastic role changed size
    if sizes:
        out.print(Text("\nSize history", style="bold"))
        out.print(_events(sizes, now))
    out.print(Text("\nEvents", style="bold"))
    out.print(_events(events, now))


@app.command("queue")
def describe_queue(ctx: typer.Context, name: str = typer.Argument(..., help="The queue.")) -> None:
    """A queue: guarantee, deserved share and capability against what it holds."""
    with connect(ctx) as client:
        queue = client.queue(name)
    out = console()
    submitters = "everyone" if queue.submitters is None else ", ".join(queue.submitters) or "admins"
    jobs = ", ".join(f"{k} {v}" for k, v in sorted(queue.jobs.items())) or "none"
    out.print(
        _fields(
            {
                "Name": queue.name,
                "Parent": queue.parent,
                "Weight": f"{queue.weight:g}",
                "Submitters": submitters,
                "Jobs": jobs,
                **dict(limits_summary(QueueDocument.model_validate(queue.document).spec)),
            }
        )
    )
    out.print(Text("\nResources", style="bold"))
    out.print(_quotas(queue))


@app.command("node")
def describe_node(ctx: typer.Context, name: str = typer.Argument(..., help="The node.")) -> None:
    """A node: capacity against allocation, every GPU with its tasks, and how its tasks
    are limited and whose uid they run as."""
    with connect(ctx) as client:
        node = client.node(name)
    out = console()
    labels = ", ".join(f"{k}={v}" for k, v in sorted(node.labels.items())) or "none"
    out.print(
        _fields(
            {
                "Name": node.name,
                "Address": node.address or "the executor's host",
                "Status": render.node_status(node),
                "Tasks": str(node.tasks),
            }
        )
    )
    out.print(_fields({"Labels": labels}))
    if node.limits or node.identity:
        out.print(_fields({"Limits": node.limits or "-", "Identity": node.identity or "-"}))
    out.print(Text("\nResources", style="bold"))
    out.print(_capacity(node))
    out.print(Text("\nGPUs", style="bold"))
    out.print(_gpus(node))


@app.command("model")
def describe_model(
    ctx: typer.Context,
    reference: str = typer.Argument(..., help="NAME (its newest version) or NAME:vN."),
) -> None:
    """A model version: digest, size, lineage (the job or run step that made it, the
    command, image and params) and its files."""
    with reported():
        name, number = models.reference(reference)
    with connect(ctx) as client:
        if number is None:
            number = client.model_versions(name)[0].version
        version = client.model_version(name, number)
    lineage = version.lineage
    fields: dict[str, str | Text] = {
        "Name": f"{version.name}:v{version.version}",
        "Digest": version.digest,
        "Size": f"{models.size(version.size)} in {version.files} file(s)",
        "User": version.user,
        "Created": _clock(version.created_at),
        "From": models.origin(version) + f" (job {version.job}, role {version.role})",
        "Command": " ".join(lineage.get("command", [])) or "-",
        "Ran in image": lineage.get("image") or "-",
    }
    if version.image_phase is not None:
        fields["Model image"] = {
            "Built": version.image or "",
            "Failed": f"Failed: {version.image_message}",
        }.get(version.image_phase, version.image_phase)
    if "params" in lineage:
        params = lineage["params"]
        fields["Params"] = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "-"
    out = console()
    out.print(_fields(fields))
    out.print(Text("\nFiles", style="bold"))
    out.print(models.files_table(version))


@app.command("inference")
def describe_inference(
    ctx: typer.Context, name: str = typer.Argument(..., help="The service.")
) -> None:
    """An inference service: where it is reached, each predictor's model version, traffic
    share and replica range, every replica with its job, phase and readiness, and its
    rollouts (newest first) with their history."""
    with connect(ctx) as client:
        service = client.inference(name)
    out = console()
    out.print(
        _fields(
            {
                "Name": service.name,
                "User": service.user,
                "URL": service.url,
                "Ready": "True" if service.ready else "False",
                "Created": _clock(service.created_at),
            }
        )
    )
    out.print(Text("\nPredictors", style="bold"))
    for predictor in service.predictors:
        out.print(
            f"  {predictor.name}: {predictor.model_version}, {predictor.traffic}% of the "
            f"traffic, {predictor.ready} Ready of {len(predictor.replicas)} "
            f"(replicas {predictor.min_replicas}..{predictor.max_replicas})",
            markup=False,
        )
    out.print(Text("\nReplicas", style="bold"))
    out.print(inferences.replicas_table(service))
    for rollout in service.rollouts:
        out.print(
            Text(
                f"\nRollout {rollout.id}: {rollout.predictor} {rollout.from_version} -> "
                f"{rollout.to_version}, steps {','.join(map(str, rollout.steps))}, by "
                f"{rollout.user}",
                style="bold",
            )
        )
        out.print(f"  {rollout.phase} at {rollout.traffic}%: {rollout.reason}", markup=False)
        for entry in rollout.history:
            out.print("  " + step_line(entry), markup=False)


@app.command("secret")
def describe_secret(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The secret."),
    user: str | None = typer.Option(None, "--user", help="That user's secret (admins)."),
) -> None:
    """A secret: its user, key names, size and times; its values are never shown."""
    with connect(ctx) as client:
        secret = client.secret(name, user=user)
    fields: dict[str, str | Text] = {
        "Name": secret.name,
        "User": secret.user,
        "Keys": secrets.keys_text(secret.keys, shown=len(secret.keys)),
        "Size": models.size(secret.size),
        "Created": _clock(secret.created_at),
        "Updated": _clock(secret.updated_at),
        "Values": "sealed at rest; never shown (your jobs get them: spec.roles[].secrets)",
    }
    console().print(_fields(fields))


@app.command("dataset")
def describe_dataset(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The dataset."),
    user: str | None = typer.Option(None, "--user", help="That user's dataset (admins)."),
) -> None:
    """A dataset: its user, source, sub-path and secret, then what its last
    listing found (phase, message, files, size, digest, when) and its times, then each
    node's cache with that listing (Warm, Filling or Failed)."""
    with connect(ctx) as client:
        dataset = client.dataset(name, user=user)
    secret = datasets.spec_field(dataset, "secret")
    anonymous = "- (read anonymously)"
    fields: dict[str, str | Text] = {
        "Name": dataset.name,
        "User": dataset.user,
        "Source": str(datasets.spec_field(dataset, "source") or "-"),
        "Path": str(datasets.spec_field(dataset, "path") or "-"),
        "Secret": str(secret) if secret else anonymous,
        "Phase": render.phase(dataset.phase),
        "Message": dataset.message or "-",
        "Files": f"{dataset.files:,}",
        "Size": models.size(dataset.size),
        "Digest": dataset.digest or "-",
        "Listed": _clock(dataset.listed_at),
        "Created": _clock(dataset.created_at),
        "Updated": _clock(dataset.updated_at),
    }
    console().print(_fields(fields))
    if dataset.nodes:
        console().print(datasets.nodes_table(dataset))
    else:
        console().print("Cached on: no node (a node copies it when a task there reads it)")


@app.command("tuning")
def describe_tuning(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The tuning."),
) -> None:
    """A tuning: the service and predictor it tunes, its objective, sampler and phase,
    the best spec so far, then every trial (candidate, state, node, throughput, p50
    and p99 latency, errors, cost, value; the best marked *) and what each fell short
    of or why it ended."""
    with connect(ctx) as client:
        tuning = client.tuning(name)
    spec = tuning.document.get("spec", {})
    objective = spec.get("objective", {})
    best = tuning.best
    fields: dict[str, str | Text] = {
        "Name": tuning.name,
        "User": tuning.user,
        "Tunes": f"inference {spec.get('inference')} (predictor {spec.get('predictor') or 'first'})"
        if spec.get("inference")
        else f"a training job, role {spec.get('role') or 'first'}, "
        f"{spec.get('trialDuration', 60):g} s a trial",
        "Objective": tunings.objective_text(objective),
        "Sampler": f"{spec.get('sampler', 'tpe')}, {spec.get('trials', 20)} trials, "
        f"{spec.get('parallel', 1)} at once",
        "Phase": render.phase(tuning.phase),
        "Message": tuning.message or "-",
        "Best": "-" if best is None else f"trial {best.number}: {tunings.params_text(best.params)}",
        "Created": _clock(tuning.created_at),
    }
    console().print(_fields(fields))
    if tuning.trials:
        console().print(tunings.trials_table(tuning))
        for line in tunings.trial_notes(tuning):
            console().print(line, highlight=False, markup=False)


def _fields(values: Mapping[str, str | Text]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in values.items():
        table.add_row(f"{key}:", value)
    return table


def _job_fields(job: JobView, now: float) -> dict[str, str | Text]:
    state = render.phase(job.phase)
    if job.reason:
        state.append(f" ({job.reason}{': ' + job.message if job.message else ''})")
    if job.cancel_requested and job.phase not in ("Cancelled", "Succeeded", "Failed"):
        state.append(" cancel requested", style="yellow")
    return {
        "Name": job.name,
        "Queue": job.queue,
        "User": job.user,
        "Phase": state,
        **(
            {"Position": f"{job.queue_position} in queue {job.queue}"}
            if job.queue_position is not None
            else {}
        ),
        **({"Priority": job.priority.line()} if job.priority is not None else {}),
        "Tasks": render.task_counts(job),
        "Requests": Resources.of(job.requests).describe(),
        "Allocated": Resources.of(job.allocated).describe() if job.allocated else "-",
        "Created": f"{_clock(job.created_at)} ({render.age(job.created_at, now)} ago)",
        "Started": _clock(job.started_at),
        "Finished": _clock(job.finished_at),
        "Attempt": render.attempt(job),
        "Preemptions": str(job.preemptions),
        **({"Progress": _progress(job.progress, now)} if job.progress else {}),
    }


def _progress(report: dict[str, Any], now: float) -> str:
    """A job's latest progress report in one line: step, share done, throughput, batch,
    age."""
    said = []
    if "step" in report:
        said.append(f"step {report['step']:,}")
    if report.get("totalSamples") and "samples" in report:
        said.append(f"{100 * report['samples'] / report['totalSamples']:.0f}% of its samples")
    if "samplesPerSecond" in report:
        said.append(f"{report['samplesPerSecond']:,.1f} samples/s")
    if "batchSize" in report:
        said.append(f"batch {report['batchSize']:,}")
    said.append(f"reported {render.age(report.get('time', now), now)} ago")
    return ", ".join(said)


def _clock(when: float | None) -> str:
    return "-" if when is None else datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S")


def _roles(document: dict[str, Any] | None) -> Table | None:
    spec = document.get("spec") if isinstance(document, dict) else None
    roles = spec.get("roles") if isinstance(spec, dict) else None
    if not isinstance(roles, list) or not roles:
        return None
    table = Table(box=None, pad_edge=False)
    for title in ("ROLE", "REPLICAS", "RESOURCES (each)", "COMMAND"):
        table.add_column(title, overflow="fold")
    for role in roles:
        if not isinstance(role, dict):
            continue
        asked = role.get("resources") or {}
        command = role.get("command")
        shown = " ".join(map(str, command)) if isinstance(command, list) else str(command or "-")
        elastic = role.get("elastic")
        size = str(role.get("replicas", 1))
        if isinstance(elastic, dict):
            size += f" ({elastic.get('minReplicas')}..{elastic.get('maxReplicas')})"
        table.add_row(
            str(role.get("name", "?")),
            size,
            ", ".join(f"{k}={v}" for k, v in asked.items()) if isinstance(asked, dict) else "-",
            shown,
        )
    return table


def _why(why: WhyView) -> Text:
    text = Text(why.reason or "waiting", style="yellow")
    if why.message:
        text.append(f": {why.message}")
    return text


def _events(events: list[EventView], now: float) -> Table | Text:
    if not events:
        return Text("none yet", style="dim")
    table = Table(box=None, pad_edge=False)
    for title in ("AGE", "KIND", "MESSAGE"):
        table.add_column(title, overflow="fold")
    for event in events:
        table.add_row(render.age(event.time, now), event.kind, event.message)
    return table


def _quotas(queue: QueueView) -> Table:
    table = Table(box=None, pad_edge=False)
    for title in ("RESOURCE", "GUARANTEE", "DESERVED", "CAPABILITY", "ALLOCATED", "OF DESERVED"):
        table.add_column(title, overflow="fold")
    names = sorted(
        {*queue.guarantee, *queue.deserved, *queue.capability, *queue.allocated},
        key=lambda n: (n not in ("gpu", "cpu", "memory"), n),
    )
    for name in names:
        allocated = queue.allocated.get(name, 0.0)
        deserved = queue.deserved.get(name)
        table.add_row(
            name,
            render.amount(name, queue.guarantee.get(name, 0.0)),
            render.amount(name, deserved),
            render.amount(name, queue.capability[name])
            if name in queue.capability
            else "unlimited",
            render.amount(name, allocated),
            render.bar(allocated, deserved or 0.0) if deserved else Text("-"),
        )
    return table


def _capacity(node: NodeView) -> Table:
    table = Table(box=None, pad_edge=False)
    for title in ("RESOURCE", "ALLOCATED", "CAPACITY", "USE"):
        table.add_column(title, overflow="fold")
    for name, capacity in node.capacity.items():
        allocated = node.allocated.get(name, 0.0)
        table.add_row(
            name,
            render.amount(name, allocated),
            render.amount(name, capacity),
            render.bar(allocated, capacity),
        )
    return table


def _card_tasks(gpu: GpuView) -> str:
    """The card's tasks the caller may see by name, then how many of other users'."""
    others = f"{gpu.other_tasks} of other users" if gpu.other_tasks else ""
    return ", ".join([*gpu.tasks, others] if others else gpu.tasks) or "-"


def _gpus(node: NodeView) -> Table | Text | Group:
    """Each card: what is given of it, its latest reading (where it is read), its tasks
    and its health; then a line per cordoned card saying why."""
    if not node.gpus:
        return Text("none", style="dim")
    read = any(gpu.utilisation is not None for gpu in node.gpus)
    table = Table(box=None, pad_edge=False)
    titles = ("GPU", "MODEL", "GIVEN", *(("UTIL", "MEMORY", "TEMP", "POWER") if read else ()))
    for title in (*titles, "TASKS", "HEALTH"):
        table.add_column(title, overflow="fold")
    for gpu in node.gpus:
        table.add_row(
            str(gpu.index),
            gpu.model or "-",
            f"{gpu.used:.0%}",
            *(gpu_lines.reading(gpu) if read else ()),
            _card_tasks(gpu),
            gpu_lines.health(gpu),
        )
    notes = gpu_lines.cordon_lines([node])
    if node.gpu_readings_absent:
        notes.append(Text(f"not read: {node.gpu_readings_absent}", style="dim"))
    return Group(table, *notes) if notes else table


# kubectl's rule: a kind is named singular or plural alike.
app.command("jobs", hidden=True)(describe_job)
app.command("queues", hidden=True)(describe_queue)
app.command("nodes", hidden=True)(describe_node)
app.command("models", hidden=True)(describe_model)
app.command("inferences", hidden=True)(describe_inference)
app.command("secrets", hidden=True)(describe_secret)
app.command("datasets", hidden=True)(describe_dataset)
app.command("tunings", hidden=True)(describe_tuning)
