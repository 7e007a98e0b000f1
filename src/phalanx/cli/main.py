"""``phalanx``: the command-line entry point."""

from __future__ import annotations

import typer

from phalanx.cli import bench, demo, sim

app = typer.Typer(
    name="phalanx",
    help="A scheduler and workflow engine for AI jobs on shared GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(bench.app, name="bench")
app.add_typer(sim.app, name="sim")
app.command("demo")(demo.demo)


if __name__ == "__main__":
    app()
