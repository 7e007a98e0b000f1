"""``phalanx``: the command-line entry point.

``--server`` and ``--token`` (before the command) override ``PHALANX_SERVER``,
``PHALANX_TOKEN`` and the config file for every command that talks to a server.
"""

from __future__ import annotations

import typer

from phalanx.cli import (
    apply,
    bench,
    cache,
    cordon,
    delete,
    demo,
    describe,
    get,
    logs,
    pipeline,
    scale,
    sim,
    top,
    up,
    users,
    wait,
)
from phalanx.cli.remote import Remote

app = typer.Typer(
    name="phalanx",
    help="A scheduler and workflow engine for AI jobs on shared GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    server: str | None = typer.Option(
        None, "--server", help="Server URL (default: $PHALANX_SERVER, the config file)."
    ),
    token: str | None = typer.Option(
        None, "--token", help="Bearer token (default: $PHALANX_TOKEN, the config file)."
    ),
) -> None:
    """A scheduler and workflow engine for AI jobs on shared GPU clusters."""
    ctx.obj = Remote(server=server, token=token)


app.command("up")(up.up)
app.command("apply")(apply.apply)
app.add_typer(get.app, name="get")
app.add_typer(describe.app, name="describe")
app.command("logs")(logs.logs)
app.add_typer(delete.app, name="delete")
app.command("cancel")(delete.cancel)
app.command("scale")(scale.scale)
app.add_typer(top.app, name="top")
app.command("cordon")(cordon.cordon)
app.command("uncordon")(cordon.uncordon)
app.command("drain")(cordon.drain)
app.add_typer(users.app, name="users")
app.add_typer(users.tokens, name="token")
app.add_typer(bench.app, name="bench")
app.add_typer(sim.app, name="sim")
app.command("demo")(demo.demo)
app.add_typer(wait.app, name="wait")
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(cache.app, name="cache")


if __name__ == "__main__":
    app()
