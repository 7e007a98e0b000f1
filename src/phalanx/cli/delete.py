"""``phalanx delete job|queue|run|pipeline|model|inference|secret|dataset|tuning NAME...`` and ``phalanx cancel JOB``: ending
things.

Each name gets one line. Deleting an ended job removes it with its events. Deleting a
live job cancels it (its tasks are stopped) and the server deletes it once it has
ended; the line says so. ``--wait`` waits until it is gone. A queue is deleted only
when it has no child queues and no live jobs; the server says which holds it. Deleting
a pipeline (its owner or an admin) forgets its document and schedule, as deleting an
Argo WorkflowTemplate does: its runs, active ones included, are kept and go on with the
document each was started with; the line says how many are active. Names are handled
in order; the first that fails ends the command with its ``error:`` line (the ones
before it are done).
"""

from __future__ import annotations

import time

import typer

from phalanx.cli import models
from phalanx.cli.remote import connect, reported
from phalanx.cli.wait import duration
from phalanx.client import Client, ClientError

app = typer.Typer(
    help="Delete jobs, queues, runs, pipelines, models, inferences, secrets, datasets or "
    "tunings (each kind "
    "singular or plural: job or jobs).",
    no_args_is_help=True,
)

_ENDED = ("Succeeded", "Failed", "Cancelled")
#: Phases of a run under way.
_ACTIVE_RUNS = ("Pending", "Running")
#: How long ``--wait`` waits for a cancelled job's tasks to stop, at most.
_WAIT_TIMEOUT = "5m"
#: Seconds between two looks at a job being deleted.
_POLL = 0.5


@app.command("job")
def delete_job(
    ctx: typer.Context,
    names: list[str] = typer.Argument(..., help="The jobs."),
    wait: bool = typer.Option(
        False, "--wait", help="For a live job: wait until it has ended and is deleted."
    ),
    timeout: str = typer.Option(
        _WAIT_TIMEOUT, "--timeout", help="With --wait: how long at most, per job (30s, 5m)."
    ),
) -> None:
    """Remove jobs: an ended one at once, a live one is cancelled and removed once ended."""
    seconds = duration("--timeout", timeout)
    with connect(ctx) as client:
        for name in names:
            typer.echo(_delete_one(client, name, wait=wait, timeout=seconds))


def _delete_one(client: Client, name: str, *, wait: bool, timeout: float) -> str:
    job = client.delete_job(name)
    if job.phase in _ENDED:
        return f"job/{name} deleted"
    if not wait:
        return (
            f"job/{name} is {job.phase}: cancelled; it is deleted once its tasks have "
            "stopped (--wait waits for that)"
        )
    gone(client, name, timeout=timeout)
    return f"job/{name} cancelled and deleted"


def gone(client: Client, name: str, *, timeout: float) -> None:
    """Wait until job ``name`` no longer exists; ``ClientError`` naming it past ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            job = client.job(name)
        except ClientError as error:
            if error.status == 404:
                return
            raise
        if time.monotonic() > deadline:
            raise ClientError(
                f"job {name} is still {job.phase} after {timeout:g}s; its deletion is "
                "requested and happens once its tasks have stopped",
                fix=f"see what holds it: phalanx describe job {name}",
            )
        time.sleep(_POLL)


@app.command("queue")
def delete_queue(
    ctx: typer.Context, names: list[str] = typer.Argument(..., help="The queues.")
) -> None:
    """Delete queues with no child queues and no live jobs (admins)."""
    with connect(ctx) as client:
        for name in names:
            client.delete_queue(name)
            typer.echo(f"queue/{name} deleted")


def cancel(ctx: typer.Context, name: str = typer.Argument(..., help="The job.")) -> None:
    """Cancel a job: its tasks are stopped, then it is Cancelled."""
    with connect(ctx) as client:
        job = client.cancel(name)
    if job.phase in _ENDED:
        typer.echo(f"job/{name} already ended: {job.phase}")
    else:
        typer.echo(f"job/{name} cancel requested")


@app.command("run")
def delete_run(
    ctx: typer.Context, run_ids: list[str] = typer.Argument(..., help="The runs.")
) -> None:
    """Stop active runs (their running steps' jobs are cancelled, finally steps run, then
    the run is Cancelled); forget ended ones."""
    with connect(ctx) as client:
        for run_id in run_ids:
            run = client.delete_run(run_id)
            if run.phase in _ENDED:
                typer.echo(f"run/{run_id} deleted")
            else:
                typer.echo(f"run/{run_id} is {run.phase}: stopping")


@app.command("pipeline")
def delete_pipeline(
    ctx: typer.Context, names: list[str] = typer.Argument(..., help="The pipelines.")
) -> None:
    """Forget pipelines (their owner or an admin): they can no longer be run and their
    schedules fire no more; their runs, active ones included, are kept and go on."""
    with connect(ctx) as client:
        for name in names:
            active = client.runs(pipeline=name, phase=_ACTIVE_RUNS)
            client.delete_pipeline(name)
            if active:
                typer.echo(
                    f"pipeline/{name} deleted; its {len(active)} active run(s) go on "
                    f"(stop them with phalanx delete run {' '.join(r.id for r in active)})"
                )
            else:
                typer.echo(f"pipeline/{name} deleted")


@app.command("model")
def delete_model(
    ctx: typer.Context,
    references: list[str] = typer.Argument(..., help="NAME (every version) or NAME:vN."),
) -> None:
    """Delete model versions (their owner or an admin): their files leave the model store;
    a number is never given again, and the name stays its owner's."""
    with reported():
        wanted = [models.reference(text) for text in references]
    with connect(ctx) as client:
        for name, number in wanted:
            for gone in client.delete_model(name, number):
                typer.echo(f"model/{gone.name}:v{gone.version} deleted")


@app.command("inference")
def delete_inference(
    ctx: typer.Context, names: list[str] = typer.Argument(..., help="The services.")
) -> None:
    """Delete inference services (their owner or an admin): the gateway stops routing to
    them, and their replicas are stopped."""
    with connect(ctx) as client:
        for name in names:
            client.delete_inference(name)
            typer.echo(f"inference/{name} deleted")


@app.command("secret")
def delete_secret(
    ctx: typer.Context,
    names: list[str] = typer.Argument(..., help="The secrets."),
    user: str | None = typer.Option(None, "--user", help="That user's secrets (admins)."),
) -> None:
    """Delete your secrets (an admin: --user's): jobs naming one that have not started
    fail to start, saying so; running tasks keep what they were given."""
    with connect(ctx) as client:
        for name in names:
            client.delete_secret(name, user=user)
            typer.echo(f"secret/{name} deleted")


@app.command("dataset")
def delete_dataset(
    ctx: typer.Context,
    names: list[str] = typer.Argument(..., help="The datasets."),
    user: str | None = typer.Option(None, "--user", help="That user's datasets (admins)."),
) -> None:
    """Delete your datasets (an admin: --user's): a job submitted after cannot name one;
    their copies in the nodes' caches go when room is needed, as any copy no task reads."""
    with connect(ctx) as client:
        for name in names:
            client.delete_dataset(name, user=user)
            typer.echo(f"dataset/{name} deleted")


@app.command("tuning")
def delete_tuning(
    ctx: typer.Context, names: list[str] = typer.Argument(..., help="The tunings.")
) -> None:
    """Delete tunings and their trials; replicas of trials under way are stopped (the
    services they tuned are left as they are)."""
    with connect(ctx) as client:
        for name in names:
            client.delete_tuning(name)
            typer.echo(f"tuning/{name} deleted")


# kubectl's rule: a kind is named singular or plural alike.
app.command("jobs", hidden=True)(delete_job)
app.command("queues", hidden=True)(delete_queue)
app.command("runs", hidden=True)(delete_run)
app.command("pipelines", hidden=True)(delete_pipeline)
app.command("models", hidden=True)(delete_model)
app.command("inferences", hidden=True)(delete_inference)
app.command("secrets", hidden=True)(delete_secret)
app.command("datasets", hidden=True)(delete_dataset)
app.command("tunings", hidden=True)(delete_tuning)
