"""``phalanx users create|set|list|me`` and ``phalanx token create|list|revoke``.

A new token is printed alone on stdout (``TOKEN=$(phalanx token create alice)``), the
note that it is shown only once on stderr. A listing never shows a token's secret (the
server does not keep it): a token is named by its id. A user's default queue is where
their jobs that name no queue go (none: the queue named ``default``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import typer
from rich.table import Table

from phalanx.cli.remote import OUTPUT_OPTION, Output, connect, emit, fail, machine, print_table

app = typer.Typer(help="Users (admins), and who you are (users me).", no_args_is_help=True)
tokens = typer.Typer(help="Bearer tokens.", no_args_is_help=True)


@app.command("create")
def create_user(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The user's name."),
    admin: bool = typer.Option(False, "--admin", help="An admin rather than a user."),
    account: str | None = typer.Option(
        None,
        "--account",
        help="An existing Unix account on the server's host that the user's tasks run as "
        "(default: a uid of their own, allocated by a server that runs as root).",
    ),
    default_queue: str | None = typer.Option(
        None,
        "--default-queue",
        metavar="QUEUE",
        help="Where the user's jobs that name no queue go: an existing leaf queue they may "
        "submit to (default: the queue named default).",
    ),
) -> None:
    """Create a user and print their first token."""
    role: Literal["admin", "user"] = "admin" if admin else "user"
    with connect(ctx) as client:
        made = client.create_user(name, role, account=account, default_queue=default_queue)
    runs_as = ""
    if made.account is not None:
        runs_as = f" (tasks run as account {made.account}, uid {made.uid})"
    elif made.uid is not None:
        runs_as = f" (tasks run as uid {made.uid})"
    if made.default_queue is not None:
        runs_as += f", default queue {made.default_queue}"
    typer.echo(f"user {made.user} created{runs_as}; their token (shown only now):", err=True)
    typer.echo(made.token)


@app.command("set")
def set_user(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The user's name."),
    default_queue: str | None = typer.Option(
        None,
        "--default-queue",
        metavar="QUEUE",
        help="Where the user's jobs that name no queue go from now on: an existing leaf "
        "queue they may submit to.",
    ),
    no_default_queue: bool = typer.Option(
        False,
        "--no-default-queue",
        help="Clear it: their jobs that name no queue go to the queue named default.",
    ),
) -> None:
    """Change a user: their default queue (jobs already submitted stay where they are)."""
    if (default_queue is None) == (not no_default_queue):
        fail("nothing to set; fix: give --default-queue QUEUE or --no-default-queue (one)")
    with connect(ctx) as client:
        changed = client.set_default_queue(name, default_queue)
    if changed.default_queue is None:
        typer.echo(f"user {changed.name}: no default queue (jobs naming none go to default)")
    else:
        typer.echo(f"user {changed.name}: default queue {changed.default_queue}")


@app.command("me")
def whoami(ctx: typer.Context, output: Output | None = OUTPUT_OPTION) -> None:
    """Who you are: your name, role and default queue (where your jobs that name no
    queue go)."""
    with connect(ctx) as client:
        me = client.whoami()
    if machine(output):
        assert output is not None
        emit(me, output)
        return
    queue = me.default_queue or "none (jobs naming no queue go to default)"
    typer.echo(f"name: {me.name}\nrole: {me.role}\ndefault queue: {queue}")


@app.command("list")
def list_users(ctx: typer.Context, output: Output | None = OUTPUT_OPTION) -> None:
    """Every user: their role, the uid their tasks run as and their default queue."""
    with connect(ctx) as client:
        found = client.users()
    if machine(output):
        assert output is not None
        emit(found, output)
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("NAME")
    table.add_column("ROLE")
    table.add_column("UID")
    table.add_column("ACCOUNT")
    table.add_column("DEFAULT QUEUE")
    for user in found:
        uid = "-" if user.uid is None else str(user.uid)
        table.add_row(user.name, user.role, uid, user.account or "-", user.default_queue or "-")
    print_table(table)


@tokens.command("create")
def create_token(
    ctx: typer.Context,
    user: str = typer.Argument(..., help="Whose token (yourself, or anyone for admins)."),
    label: str = typer.Option("", "--label", help="A note kept with the token."),
    expires: str | None = typer.Option(
        None, "--expires", help="How long it stays valid: 30d, 12h, 1h30m (default: until revoked)."
    ),
) -> None:
    """Make a new token for a user and print it."""
    with connect(ctx) as client:
        made = client.create_token(user, label, expires=expires)
    until = f", valid until {_clock(made.expires_at)}" if made.expires_at is not None else ""
    typer.echo(f"new token {made.id} for {made.user}{until} (shown only now):", err=True)
    typer.echo(made.token)


@tokens.command("list")
def list_tokens(
    ctx: typer.Context,
    user: str | None = typer.Argument(
        None, help="Whose tokens (default: yours; admins: anyone's)."
    ),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """A user's tokens: id, label, when made and when they expire (never the secret)."""
    with connect(ctx) as client:
        found = client.tokens(user)
    if machine(output):
        assert output is not None
        emit(found, output)
        return
    if not found:
        typer.echo(f"{user or 'you'} have no tokens", err=True)
        return
    table = Table(box=None, pad_edge=False)
    for title in ("ID", "USER", "LABEL", "CREATED", "EXPIRES", "STATUS"):
        table.add_column(title, overflow="fold")
    for token in found:
        status = "expired" if token.expired else "in use" if token.current else "valid"
        table.add_row(
            str(token.id),
            token.user,
            token.label or "-",
            _clock(token.created_at),
            "never" if token.expires_at is None else _clock(token.expires_at),
            status,
        )
    print_table(table)


@tokens.command("revoke")
def revoke_token(
    ctx: typer.Context,
    token_id: int = typer.Argument(..., metavar="ID", help="The token's id (phalanx token list)."),
) -> None:
    """Revoke one token: it is refused from now on (the one in use too)."""
    with connect(ctx) as client:
        client.revoke_token(token_id)
    typer.echo(f"token {token_id} revoked")


def _clock(when: float | None) -> str:
    return "-" if when is None else datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S")
