"""``phalanx``: the command-line entry point.

``--server`` and ``--token`` (before the command) override ``PHALANX_SERVER``,
``PHALANX_TOKEN`` and the config file for every command that talks to a server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from typer.core import TyperOption

from phalanx.cli.lazy import LazyGroup
from phalanx.cli.remote import Remote
from phalanx.cli.version import show_version

if TYPE_CHECKING:  # Typer's vendored click, named only for types
    from typer._click.core import Context


#: How a Typer that shows each parameter's type in its help (0.29: ``<bool>`` for a flag,
#: ``<str>``...) writes it; None for one that shows none.
_TYPED = getattr(TyperOption, "display_type_rich", None)


def _flag_type(self: TyperOption, ctx: Context) -> str | None:
    """A flag takes no value, so its help shows no type; other options keep theirs."""
    assert _TYPED is not None
    return None if self.is_flag else str(_TYPED(self, ctx) or "") or None


if _TYPED is not None:
    TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    name="phalanx",
    help="A scheduler and workflow engine for AI jobs on shared GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=LazyGroup,  # each command is imported when it runs (cli/lazy.py)
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
    _version: bool = typer.Option(
        False,
        "--version",
        callback=show_version,
        is_eager=True,
        help="Print this CLI's version and exit (phalanx version: the server's too).",
    ),
) -> None:
    """A scheduler and workflow engine for AI jobs on shared GPU clusters."""
    ctx.obj = Remote(server=server, token=token)


if __name__ == "__main__":
    app()
