"""``phalanx delete job|queue NAME...`` and ``phalanx cancel JOB``: ending things.

Each name gets one line. Deleting an ended job removes it with its events. Deleting a
live job cancels it (its tasks are stopped) and keeps it until it has ended: ``--wait``
waits for that end, then deletes it; without ``--wait`` the line says to delete it
again once it ended. A queue is deleted only when it has no child queues and no live
jobs; the server says which holds it. Names are handled in order; the first that fails
ends the command with its ``error:`` line (the ones before it are done).
"""

from __future__ import annotations

import typer

from phalanx.cli.remote import connect
from phalanx.cli.wait import duration
from phalanx.client import Client

app = typer.Typer(
    help="Delete jobs or queues (each kind singular or plural: job or jobs).",
    no_args_is_help=True,
)

_ENDED = ("Succeeded", "Failed", "Cancelled")
#: How long ``--wait`` waits for a cancelled job's tasks to stop, at most.
_WAIT_TIMEOUT = "5m"


@app.command("job")
def delete_job(
    ctx: typer.Context,
    names: list[str] = typer.Argument(..., help="The jobs."),
    wait: bool = typer.Option(
        False, "--wait", help="For a live job: wait until the cancel ended it, then delete it."
    ),
    timeout: str = typer.Option(
        _WAIT_TIMEOUT, "--timeout", help="With --wait: how long at most, per job (30s, 5m)."
    ),
) -> None:
    """Remove ended jobs; cancel live ones (with --wait: and remove them once ended)."""
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
            f"job/{name} is {job.phase}: cancel requested; it is kept until its tasks have "
            f"stopped: delete it again then (or use --wait)"
        )
    ended = client.wait(name, _ENDED, timeout=timeout)
    client.delete_job(name)
    return f"job/{name} cancelled ({ended.phase}) and deleted"


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


# kubectl's rule: a kind is named singular or plural alike.
app.command("jobs", hidden=True)(delete_job)
app.command("queues", hidden=True)(delete_queue)
