"""What every command that talks to a server shares: the connection, errors, ``-o``.

Guarantees: a command body run inside ``connect`` never ends in a traceback for a
phalanx error: it prints one line ``error: ...`` (with the field and the fix) to stderr
and exits with status 1. Machine output (``-o json|yaml``) goes to stdout alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

import typer
import yaml
from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.measure import Measurement

from phalanx.cli.machine import written
from phalanx.client import Client
from phalanx.domain.errors import PhalanxError


@dataclass(frozen=True, slots=True, kw_only=True)
class Remote:
    """The global ``--server`` and ``--token`` (None: environment, then config file)."""

    server: str | None = None
    token: str | None = None


class Output(StrEnum):
    """``-o``: machine-readable, or a table with more columns."""

    JSON = "json"
    YAML = "yaml"
    WIDE = "wide"


OUTPUT_OPTION = typer.Option(
    None,
    "--output",
    "-o",
    help="json, yaml, or wide (more columns). json and yaml write quantities as documents "
    'do (cpu: "32", memory: 256Gi) and times as RFC 3339 UTC (2026-11-25T23:02:00Z); '
    "each object's 'canonical' holds those fields as the API gives them (millicores, "
    "bytes, epoch seconds).",
)


def console() -> Console:
    """Where tables go (stdout), with no markup surprises from data."""
    return Console(highlight=False, soft_wrap=False)


def print_table(table: RenderableType) -> None:
    """Print ``table`` at its natural width, however narrow the terminal (or the 80
    columns assumed for a pipe): long lines are the terminal's to wrap, as with kubectl,
    and a cell is never folded or cut."""
    out = console()
    natural = Measurement.get(out, out.options.update(width=10_000), table).maximum
    Console(highlight=False, soft_wrap=False, width=max(out.width, natural)).print(table)


@contextmanager
def connect(ctx: typer.Context) -> Iterator[Client]:
    """A client for the global options; phalanx errors inside end the command cleanly."""
    remote = ctx.find_object(Remote) or Remote()
    with reported(), Client(remote.server, remote.token) as client:
        yield client


@contextmanager
def reported() -> Iterator[None]:
    """Turn a ``PhalanxError`` raised inside into ``error: ...`` on stderr and exit 1."""
    try:
        yield
    except PhalanxError as error:
        fail(error)


def fail(error: PhalanxError | str) -> NoReturn:
    """Print ``error: ...`` (first line; further lines indented) and exit with status 1."""
    lines = describe(error).splitlines() or ["unknown error"]
    typer.echo(f"error: {lines[0]}", err=True)
    for line in lines[1:]:
        typer.echo(f"  {line}", err=True)
    raise typer.Exit(1)


def describe(error: PhalanxError | str) -> str:
    """The error's text, with its field and fix appended when the text does not say them
    (a text names a field as ``field: ...``)."""
    text = str(error)
    if isinstance(error, str):
        return text
    field = getattr(error, "field", None)
    fix = getattr(error, "fix", None)
    first, _, rest = text.partition("\n")
    if isinstance(field, str) and field and not (f"{field}:" in text or f"field: {field}" in text):
        first += f"; field: {field}"
    if isinstance(fix, str) and fix and fix not in text:
        first += f"; fix: {fix}"
    return f"{first}\n{rest}" if rest else first


def emit(data: BaseModel | Sequence[BaseModel], output: Output) -> None:
    """Print views as JSON or YAML: a list stays a list, one view an object; quantities
    and times written as ``cli.machine`` says, with each object's ``canonical``."""
    plain: Any = written(
        data.model_dump(mode="json")
        if isinstance(data, BaseModel)
        else [item.model_dump(mode="json") for item in data]
    )
    if output is Output.JSON:
        typer.echo(json.dumps(plain, indent=2))
    else:
        typer.echo(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True), nl=False)


def machine(output: Output | None) -> bool:
    """True when ``output`` asks for JSON or YAML."""
    return output in (Output.JSON, Output.YAML)
