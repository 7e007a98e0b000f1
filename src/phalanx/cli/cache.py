"""``phalanx cache list [--pipeline P]``, ``cache show KEY`` and ``cache evict KEY |
--pipeline P``: the step cache's entries.

``list`` shows each entry's key (its first 16 hex digits; ``-o json`` gives it whole),
pipeline, unit, the run that produced it and its age; ``show`` one entry in full as
YAML (outputs, artifacts with their content hashes, the document its key hashes);
``evict`` prints one ``cache/KEY evicted`` line per entry. Each sees the caller's own
entries (an admin's: everyone's): an entry is its user's.
"""

from __future__ import annotations

import time

import typer
import yaml
from rich.table import Table

from phalanx.cli import render
from phalanx.cli.machine import written
from phalanx.cli.remote import OUTPUT_OPTION, Output, connect, emit, fail, machine, print_table
from phalanx.client import CacheEntryView

app = typer.Typer(help="The step cache of pipelines.", no_args_is_help=True)


@app.command("list")
def list_entries(
    ctx: typer.Context,
    pipeline: str | None = typer.Option(None, "--pipeline", help="Only this pipeline's."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Cache entries, oldest first."""
    with connect(ctx) as client:
        found = client.cache_entries(pipeline=pipeline)
    if machine(output):
        assert output is not None
        emit(found, output)
        return
    now = time.time()
    table = Table(box=None, pad_edge=False)
    for title in ("KEY", "PIPELINE", "STEP", "RUN", "AGE"):
        table.add_column(title, no_wrap=True)
    for entry in found:
        table.add_row(
            entry.key[:16],
            entry.pipeline,
            entry.unit,
            entry.run_id,
            render.age(entry.created_at, now),
        )
    print_table(table)


@app.command("show")
def show(
    ctx: typer.Context,
    key: str = typer.Argument(..., help="The entry's key (whole, or a unique prefix)."),
) -> None:
    """One entry: lineage, outputs, artifacts and their hashes, the document hashed
    (times in RFC 3339 UTC, as -o yaml writes them)."""
    with connect(ctx) as client:
        entry = client.cache_entry(_whole(client.cache_entries(), key))
    shown = written(entry.model_dump(mode="json"))
    typer.echo(yaml.safe_dump(shown, sort_keys=False), nl=False)


@app.command("evict")
def evict(
    ctx: typer.Context,
    key: str | None = typer.Argument(None, help="The entry's key (or a unique prefix)."),
    pipeline: str | None = typer.Option(None, "--pipeline", help="Every entry of it."),
) -> None:
    """Evict one of your entries, or every one of a pipeline's (an admin: anyone's)."""
    if (key is None) == (pipeline is None):
        fail("give a KEY or --pipeline P (one of them)")
    with connect(ctx) as client:
        if key is not None:
            gone = client.evict_cache(_whole(client.cache_entries(), key))
        else:
            gone = client.evict_cache(pipeline=pipeline)
    for entry in gone:
        typer.echo(f"cache/{entry.key[:16]} evicted")


def _whole(entries: list[CacheEntryView], prefix: str) -> str:
    """The one key that starts with ``prefix`` (as given when none or several do)."""
    found = [entry.key for entry in entries if entry.key.startswith(prefix.lower())]
    return found[0] if len(found) == 1 else prefix
