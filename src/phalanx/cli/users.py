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
) -> None:
    """Create a user and print their first token."""
    with connect(ctx) as client:
        made = client.create_user(name, "admin" if admin else "user")
    typer.echo(f"user {made.user} created; their token (shown only now):", err=True)
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
    for user in found:
        table.add_row(user.name, user.role)
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
