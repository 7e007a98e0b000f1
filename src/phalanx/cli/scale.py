"""``phalanx scale JOB N``: the size an owner asks of a job's elastic role."""

from __future__ import annotations

import typer

from phalanx.cli.remote import connect


def scale(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The job."),
    replicas: int = typer.Argument(..., help="Replicas of its elastic role, within its range."),
) -> None:
    """Resize a job's elastic role: replicas are added (placed when there is room) or
    the highest are stopped; the job keeps running."""
    with connect(ctx) as client:
        job = client.scale(name, replicas)
    typer.echo(f"job/{job.name} scale to {replicas} requested")
