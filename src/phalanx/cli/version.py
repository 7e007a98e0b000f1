"""``phalanx version`` and ``phalanx --version``: which phalanx this is, and the server's.

``--version`` prints this CLI's version alone, offline. ``version`` also asks the server
the CLI is pointed at (``/healthz``, no token needed) and prints its version, or why it
could not (it still exits 0: the CLI's own version is known), as ``kubectl version``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version

import typer

from phalanx.cli.remote import Remote


def cli_version() -> str:
    """The installed phalanx's version (``unknown`` when it is run from a source tree that
    was never installed)."""
    try:
        return installed_version("phalanx")
    except PackageNotFoundError:
        return "unknown"


def show_version(value: bool) -> None:
    """``--version``'s callback: print the CLI's version and exit."""
    if value:
        typer.echo(f"phalanx {cli_version()}")
        raise typer.Exit


def version(ctx: typer.Context) -> None:
    """This CLI's version, and the version of the server it is pointed at."""
    from phalanx.client import Client, ClientError  # noqa: PLC0415  (only for this command)

    typer.echo(f"client: phalanx {cli_version()}")
    remote = ctx.find_object(Remote) or Remote()
    try:
        with Client(remote.server, remote.token) as client:
            health = client.health()
            typer.echo(f"server: phalanx {health.version} at {client.server}")
    except ClientError as error:
        typer.echo(f"server: not reached ({error})")
