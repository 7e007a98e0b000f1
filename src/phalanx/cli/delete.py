"""``phalanx delete job|queue NAME`` and ``phalanx cancel JOB``: ending things.

Deleting a live job cancels it (its tasks are stopped); delete it again once it has
ended to remove it with its events. A queue is deleted only when it has no child
queues and no live jobs; the server says which holds it.
"""

from __future__ import annotations

import typer

from phalanx.cli.remote import connect

app = typer.Typer(help="Delete a job or a queue.", no_args_is_help=True)

_ENDED = ("Succeeded", "Failed", "Cancelled")


@app.command("job")
def delete_job(ctx: typer.Context, name: str = typer.Argument(..., help="The job.")) -> None:
    """Remove a finished job; cancel a live one."""
    with connect(ctx) as client:
        job = client.delete_job(name)
    if job.phase in _ENDED:
        typer.echo(f"job/{name} deleted")
    else:
        typer.echo(f"job/{name} is {job.phase}: cancel requested; delete it again once it ended")


@app.command("queue")
def delete_queue(ctx: typer.Context, name: str = typer.Argument(..., help="The queue.")) -> None:
    """Delete a queue with no child queues and no live jobs (admins)."""
    with connect(ctx) as client:
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
