"""``phalanx cordon|uncordon|drain NODE``: take a node out of service and back (admins)."""

from __future__ import annotations

import typer

from phalanx.cli.remote import connect

NODE = typer.Argument(..., help="The node.")


def cordon(ctx: typer.Context, name: str = NODE) -> None:
    """No new tasks go to the node; running ones stay."""
    with connect(ctx) as client:
        client.cordon(name)
    typer.echo(f"node/{name} cordoned")


def uncordon(ctx: typer.Context, name: str = NODE) -> None:
    """The node takes new tasks again (ends a drain too)."""
    with connect(ctx) as client:
        client.uncordon(name)
    typer.echo(f"node/{name} uncordoned")


def drain(ctx: typer.Context, name: str = NODE) -> None:
    """Cordon the node and stop its tasks; their jobs are placed again elsewhere."""
    with connect(ctx) as client:
        node = client.drain(name)
    typer.echo(f"node/{name} draining ({node.tasks} task(s) to move)")
