"""``phalanx cordon|uncordon|drain NODE``: take a node out of service and back (admins);
``--gpu N`` (cordon, uncordon): one card of it alone."""

from __future__ import annotations

import typer

from phalanx.cli.remote import connect

NODE = typer.Argument(..., help="The node.")
GPU = typer.Option(
    None, "--gpu", min=0, help="One card of the node (its index) instead of the whole node."
)
REASON = typer.Option(None, "--reason", help="Why (with --gpu; shown with the card).")


def cordon(
    ctx: typer.Context, name: str = NODE, gpu: int | None = GPU, reason: str | None = REASON
) -> None:
    """No new tasks go to the node (or to its card --gpu N); running ones stay."""
    with connect(ctx) as client:
        if gpu is None:
            client.cordon(name)
            typer.echo(f"node/{name} cordoned")
            return
        client.cordon_gpu(name, gpu, reason)
    typer.echo(f"node/{name} gpu {gpu} cordoned")


def uncordon(ctx: typer.Context, name: str = NODE, gpu: int | None = GPU) -> None:
    """The node takes new tasks again (ends a drain too); with --gpu N its card N alone
    does (one its health took out is judged afresh from its next readings)."""
    with connect(ctx) as client:
        if gpu is None:
            client.uncordon(name)
            typer.echo(f"node/{name} uncordoned")
            return
        answer = client.uncordon_gpu(name, gpu)
    said = "uncordoned" if answer.was_cordoned else "was not cordoned"
    typer.echo(f"node/{name} gpu {gpu} {said}")


def drain(ctx: typer.Context, name: str = NODE) -> None:
    """Cordon the node and stop its tasks; their jobs are placed again elsewhere."""
    with connect(ctx) as client:
        node = client.drain(name)
    typer.echo(f"node/{name} draining ({node.tasks} task(s) to move)")
