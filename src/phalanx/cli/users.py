"""``phalanx users create|list`` and ``phalanx token create USER``.

A new token is printed alone on stdout (``TOKEN=$(phalanx token create alice)``), the
note that it is shown only once on stderr.
"""

from __future__ import annotations

import typer
from rich.table import Table

from phalanx.cli.remote import OUTPUT_OPTION, Output, connect, emit, machine, print_table

app = typer.Typer(help="Users (admins).", no_args_is_help=True)
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
) -> None:
    """Create a user and print their first token."""
    with connect(ctx) as client:
        made = client.create_user(name, "admin" if admin else "user", account=account)
    runs_as = ""
    if made.account is not None:
        runs_as = f" (tasks run as account {made.account}, uid {made.uid})"
    elif made.uid is not None:
        runs_as = f" (tasks run as uid {made.uid})"
    typer.echo(f"user {made.user} created{runs_as}; their token (shown only now):", err=True)
    typer.echo(made.token)


@app.command("list")
def list_users(ctx: typer.Context, output: Output | None = OUTPUT_OPTION) -> None:
    """Every user and their role."""
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
    for user in found:
        uid = "-" if user.uid is None else str(user.uid)
        table.add_row(user.name, user.role, uid, user.account or "-")
    print_table(table)


@tokens.command("create")
def create_token(
    ctx: typer.Context,
    user: str = typer.Argument(..., help="Whose token (yourself, or anyone for admins)."),
    label: str = typer.Option("", "--label", help="A note kept with the token."),
) -> None:
    """Make a new token for a user and print it."""
    with connect(ctx) as client:
        made = client.create_token(user, label)
    typer.echo(f"new token for {made.user} (shown only now):", err=True)
    typer.echo(made.token)
