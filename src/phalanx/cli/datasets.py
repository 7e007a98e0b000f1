"""``phalanx dataset refresh NAME`` and ``phalanx dataset warm NAME``, and the tables
of ``get datasets`` and ``describe dataset``.

A dataset is created, changed and deleted as a document (``phalanx apply -f``,
``phalanx delete dataset``); this group holds what is done to one in place. ``refresh``
prints one line, ``dataset/NAME refresh requested: PHASE``, the phase the server gave
it then: the listing itself happens soon after (``phalanx get datasets NAME`` shows it).
``warm`` prints ``dataset/NAME warm requested on NODES``: the copies are made soon
after (``phalanx describe dataset NAME`` shows each node's cache).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import typer
from rich.table import Table

from phalanx.cli.models import size
from phalanx.cli.remote import connect
from phalanx.cli.render import age, phase
from phalanx.client import DatasetView

app = typer.Typer(
    help="Act on datasets: remote data your jobs read from their node's cache (create "
    "one with phalanx apply -f DATASET.yaml, list them with phalanx get datasets).",
    no_args_is_help=True,
)


@app.command("refresh")
def refresh_dataset(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The dataset."),
    user: str | None = typer.Option(None, "--user", help="That user's dataset (admins)."),
) -> None:
    """List a dataset's source again (its data changed): jobs started after the new
    listing read the new data."""
    with connect(ctx) as client:
        view = client.refresh_dataset(name, user=user)
    typer.echo(f"dataset/{name} refresh requested: {view.phase}")


@app.command("warm")
def warm_dataset(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The dataset."),
    nodes: str = typer.Option(
        "", "--nodes", help="Comma-separated nodes whose caches get it (default: every node)."
    ),
    user: str | None = typer.Option(None, "--user", help="That user's dataset (admins)."),
) -> None:
    """Copy a dataset's current listing into nodes' caches now, ahead of the jobs that
    read it (phalanx describe dataset NAME shows each node's cache)."""
    named = [node.strip() for node in nodes.split(",") if node.strip()]
    with connect(ctx) as client:
        client.warm_dataset(name, named, user=user)
    typer.echo(f"dataset/{name} warm requested on {', '.join(named) or 'every node'}")


def nodes_table(dataset: DatasetView) -> Table:
    """One row per node whose cache holds the dataset's current listing, is being given
    it, or could not be: the node, the state and why."""
    table = Table(box=None, pad_edge=False)
    for title in ("NODE", "CACHE", "MESSAGE"):
        table.add_column(title, overflow="fold")
    for node in dataset.nodes:
        table.add_row(node.node, phase(node.state), node.message or "-")
    return table


def datasets_table(datasets: Sequence[DatasetView], now: float) -> Table:
    """One row per dataset: its name, user, phase, what its last listing counted (files
    and size) and its source, and its age."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "USER", "PHASE", "FILES", "SIZE", "SOURCE", "AGE"):
        table.add_column(title, overflow="fold")
    for dataset in datasets:
        table.add_row(
            dataset.name,
            dataset.user,
            phase(dataset.phase),
            f"{dataset.files:,}",
            size(dataset.size),
            source_text(dataset),
            age(dataset.created_at, now),
        )
    return table


def source_text(dataset: DatasetView) -> str:
    """Where the dataset's data lives: its document's ``spec.source``, then ``/`` and
    ``spec.path`` when it has one (``s3://bucket/prefix/train``); ``-`` without a source."""
    spec = _spec(dataset)
    source, path = spec.get("source"), spec.get("path")
    if not isinstance(source, str) or not source:
        return "-"
    if isinstance(path, str) and path:
        return f"{source.rstrip('/')}/{path}"
    return source


def spec_field(dataset: DatasetView, name: str) -> Any:
    """``spec.NAME`` of the dataset's document, or None when it has none."""
    return _spec(dataset).get(name)


def _spec(dataset: DatasetView) -> Mapping[str, Any]:
    spec = dataset.document.get("spec")
    return spec if isinstance(spec, Mapping) else {}
