"""``phalanx usage``: what jobs held and what it cost, as Slurm's ``sacct``/``sreport``.

Rows by job (default), user, queue or allocation (``--by``), each with GPU-, CPU- and
memory-hours held within ``[--since, --until)`` (ISO dates, epoch seconds or spans ago
such as ``7d``), the cost at the server's prices and what elastic jobs saved on
reclaimable nodes, then the total. A Rich table for people (``-o wide`` adds columns),
``-o json``/``yaml`` the API's report, ``-o csv`` one line per row with a header.
"""

from __future__ import annotations

import csv
import sys
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer
from rich.table import Table

from phalanx.cli.remote import Output, connect, emit, fail, print_table
from phalanx.wire.usage import TIME_FIX, UsageRowView, UsageView, parse_time


class Format(StrEnum):
    """``-o``: a wider table, or machine-readable output."""

    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    CSV = "csv"


class Rows(StrEnum):
    """``--by``: what a row is."""

    JOB = "job"
    USER = "user"
    QUEUE = "queue"
    ALLOCATION = "allocation"


#: The CSV columns, in order (times as RFC 3339 UTC).
CSV_COLUMNS = (
    "key",
    "job",
    "user",
    "queue",
    "allocations",
    "hours",
    "gpu_hours",
    "cpu_hours",
    "memory_gib_hours",
    "cost",
    "saved",
    "task",
    "node",
    "price_class",
    "reclaimable",
    "start",
    "end",
    "ended_by",
)


def usage(
    ctx: typer.Context,
    user: str | None = typer.Option(None, "--user", help="Only this user's (admins only)."),
    queue: str | None = typer.Option(None, "--queue", help="Only jobs of this queue."),
    job: str | None = typer.Option(None, "--job", help="Only this job."),
    since: str | None = typer.Option(
        None, "--since", help="Window start: 2025-01-31, 2025-01-31T08:00Z, or 7d, 12h ago."
    ),
    until: str | None = typer.Option(None, "--until", help="Window end (default: now)."),
    by: Rows = typer.Option(Rows.JOB, "--by", help="Rows per job, user, queue or allocation."),
    output: Format | None = typer.Option(None, "--output", "-o", help="wide, json, yaml or csv."),
) -> None:
    """GPU-, CPU(core)- and memory(GiB)-hours held, their cost and what elastic jobs saved
    on reclaimable nodes; a user sees their own, an admin everyone's."""
    now = time.time()
    window = {name: _time(value, name, now) for name, value in (("since", since), ("until", until))}
    with connect(ctx) as client:
        view = client.usage(user=user, queue=queue, job=job, by=by.value, **window)
    if output in (Format.JSON, Format.YAML):
        emit(view, Output(output.value))
    elif output is Format.CSV:
        write_csv(view)
    else:
        print_table(table(view, wide=output is Format.WIDE))


def _time(text: str | None, option: str, now: float) -> float | None:
    """An option's time as epoch seconds (spans ago count from this machine's clock)."""
    if text is None:
        return None
    try:
        return parse_time(text, now=now)
    except ValueError as error:
        fail(f"--{option}: {error}; fix: {TIME_FIX}")


def _utc(value: float | None) -> str:
    if value is None:
        return ""
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _cell(row: UsageRowView, column: str) -> Any:
    value = getattr(row, column)
    if column in ("start", "end"):
        return _utc(value)
    if isinstance(value, float):
        return f"{value:.6f}"
    return "" if value is None else value


def write_csv(view: UsageView) -> None:
    """The rows, then the total, as CSV with a header line."""
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(CSV_COLUMNS)
    for row in [*view.items, view.total]:
        out.writerow([_cell(row, column) for column in CSV_COLUMNS])


def table(view: UsageView, *, wide: bool = False) -> Table:
    """The rows and the total for people."""
    allocations = view.by == "allocation"
    window = f"{_utc(view.since) or 'the beginning'} .. {_utc(view.until)}"
    shown = Table(title=f"usage by {view.by}, {window}", title_justify="left")
    shown.add_column("TASK" if allocations else view.by.upper())
    if allocations:
        shown.add_column("NODE")
    for name in ("GPU-H", "CPU-H", "MEM GIB-H", "COST", "SAVED"):
        shown.add_column(name, justify="right")
    if wide:
        for name in ("USER", "QUEUE", "ALLOCS", "HOURS", "CLASS", "START", "END"):
            shown.add_column(name)
    for row in [*view.items, view.total]:
        first = row.key if not allocations or row is view.total else (row.task or row.key)
        cells = [first, *([row.node or ""] if allocations else [])]
        cells += [f"{row.gpu_hours:.2f}", f"{row.cpu_hours:.2f}", f"{row.memory_gib_hours:.2f}"]
        cells += [f"{row.cost:.2f}", f"{row.saved:.2f}"]
        if wide:
            cells += [row.user or "", row.queue or "", str(row.allocations), f"{row.hours:.2f}"]
            cells += [row.price_class or "", _utc(row.start), _utc(row.end)]
        shown.add_row(*cells, style="bold" if row is view.total else None)
    return shown
