"""``phalanx secret create NAME --from-literal KEY=VALUE --from-file KEY=PATH``, and the
tables of ``get secrets`` and ``describe secret``.

Guarantees: no value is ever printed, by a table, a line or an error: an argument that
cannot be read is named by its option and its key (or its path), never by what it
holds. ``create`` prints one line, ``secret/NAME created`` (or ``configured`` with
``--replace`` over an existing one). A value given with ``--from-literal`` is text; one
read with ``--from-file`` is the file's bytes, as they are (at most 1 MiB).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import typer
from rich.table import Table

from phalanx.cli.models import size
from phalanx.cli.remote import connect, reported
from phalanx.cli.render import age
from phalanx.client import SecretView
from phalanx.domain.errors import InvalidInput
from phalanx.spec.secret import MAX_SECRET_BYTES

app = typer.Typer(
    help="Create secrets: keys your jobs get as environment variables or files, never "
    "shown back (list them with phalanx get secrets).",
    no_args_is_help=True,
)

#: Keys a listing names before it counts the rest.
SHOWN_KEYS = 5


@app.command("create")
def create_secret(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The secret's name (DNS-1123), unique among yours."),
    literals: list[str] | None = typer.Option(
        None,
        "--from-literal",
        help="KEY=VALUE: a key and its value as text (repeatable). The value stays in "
        "your shell's history and is visible to other users in the process list while "
        "the command runs: prefer --from-file for a real secret.",
    ),
    files: list[str] | None = typer.Option(
        None,
        "--from-file",
        help="KEY=PATH, or PATH (the key is the file's name): a key whose value is the "
        "file's bytes (repeatable).",
    ),
    replace: bool = typer.Option(
        False, "--replace", help="Replace your secret of that name if there is one."
    ),
    user: str | None = typer.Option(None, "--user", help="Another user's secret (admins)."),
) -> None:
    """Create a secret from literals and files: each key is given once; its values are
    sealed by the server and never shown again."""
    with reported():
        values = gathered(literals or [], files or [])
    with connect(ctx) as client:
        if replace:
            view = client.put_secret(name, values, user=user)
            action = "created" if view.created_at == view.updated_at else "configured"
        else:
            client.create_secret(name, values, user=user)
            action = "created"
    typer.echo(f"secret/{name} {action}")


def gathered(literals: Sequence[str], files: Sequence[str]) -> dict[str, str | bytes]:
    """The keys and values of ``--from-literal`` and ``--from-file`` arguments;
    ``InvalidInput`` naming the option and the key (never a value) for a bad one."""
    values: dict[str, str | bytes] = {}

    def add(option: str, key: str, value: str | bytes) -> None:
        if not key:
            raise InvalidInput(
                "an argument has no key before '='", field=option, fix=f"write {option} KEY=..."
            )
        if key in values:
            raise InvalidInput(
                f"key {key[:60]!r} is given twice", field=option, fix="give each key once"
            )
        values[key] = value

    for literal in literals:
        key, equals, value = literal.partition("=")
        if not equals:  # the argument may be a value: it is not shown
            raise InvalidInput(
                "an argument is not KEY=VALUE (it is not shown)",
                field="--from-literal",
                fix="write --from-literal KEY=VALUE",
            )
        add("--from-literal", key, value)
    for given in files:
        key, equals, path = given.partition("=")
        if not equals:
            key, path = os.path.basename(given), given
        add("--from-file", key, _read(Path(path)))
    if not values:
        raise InvalidInput(
            "a secret needs at least one key",
            field="--from-literal",
            fix="give --from-literal KEY=VALUE or --from-file KEY=PATH",
        )
    return values


def _read(path: Path) -> bytes:
    """The bytes of the file at ``path``, at most ``MAX_SECRET_BYTES``."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as error:
        raise InvalidInput(
            f"cannot read {path}: {error.strerror or error}",
            field="--from-file",
            fix="check the path and its permissions",
        ) from None
    if len(data) > MAX_SECRET_BYTES:
        raise InvalidInput(
            f"{path} is over the limit of {size(MAX_SECRET_BYTES)} for a secret",
            field="--from-file",
            fix="keep large data out of secrets (store it where a job reads it)",
        )
    return data


def secrets_table(secrets: Sequence[SecretView], now: float) -> Table:
    """One row per secret: its name, key names, size, user and age; never a value."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "KEYS", "SIZE", "USER", "AGE"):
        table.add_column(title, overflow="fold")
    for secret in secrets:
        table.add_row(
            secret.name,
            keys_text(secret.keys),
            size(secret.size),
            secret.user,
            age(secret.created_at, now),
        )
    return table


def keys_text(keys: Sequence[str], shown: int = SHOWN_KEYS) -> str:
    """``A, B, C`` or, past ``shown`` keys, ``A, B, ... and 7 more``."""
    if len(keys) <= shown:
        return ", ".join(keys)
    return f"{', '.join(keys[:shown])} and {len(keys) - shown} more"
