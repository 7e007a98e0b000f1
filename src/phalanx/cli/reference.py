"""The command-line reference page, generated from the Typer commands themselves.

``python -m phalanx.cli.reference > docs/reference/cli.md`` writes it, and a test checks
that the committed page equals this output, so the page never drifts from the commands.
Every command and group, depth first in the order ``phalanx --help`` lists them, with its
help, its usage line and a table of its arguments and options; hidden ones are left out.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer
import typer.main
from typer import Context
from typer.core import TyperGroup, TyperOption

from phalanx.cli.main import app

if TYPE_CHECKING:  # Typer's commands are its vendored click's, named only for types
    from typer._click.core import Command, Parameter

HEADER = """\
# CLI reference

Every command of `phalanx`, generated from the commands themselves
(`python -m phalanx.cli.reference > docs/reference/cli.md`; a test keeps this page equal to
that output). `phalanx COMMAND --help` prints the same. `--server` and `--token` go before
the command: `phalanx --server URL get jobs`.
"""

#: Typer's own options, the same on every command.
_LEFT_OUT = frozenset({"install_completion", "show_completion"})


def render() -> str:
    """The whole page, Markdown."""
    root = typer.main.get_command(app)
    parts = [HEADER]
    _command(root, Context(root, info_name="phalanx"), parts)
    return "\n".join(parts)


def _command(command: Command, context: Context, parts: list[str]) -> None:
    path = context.command_path
    parts.append(f"## {path}\n")
    text = _help(command)
    if text:
        parts.append(text + "\n")
    usage = " ".join(command.collect_usage_pieces(context))
    parts.append(f"```\n{path} {usage}\n```\n")
    shown_params = [
        p
        for p in command.get_params(context)
        if not getattr(p, "hidden", False) and p.name not in _LEFT_OUT
    ]
    if shown_params:
        parts.append("| argument or option | type | default | meaning |")
        parts.append("|---|---|---|---|")
        parts.extend(_row(param, context) for param in shown_params)
        parts.append("")
    if isinstance(command, TyperGroup):
        children = [
            (name, command.get_command(context, name)) for name in command.list_commands(context)
        ]
        shown = [
            (name, child) for name, child in children if child is not None and not child.hidden
        ]
        if shown:
            links = ", ".join(f"[`{name}`](#{_anchor(path, name)})" for name, _ in shown)
            parts.append(f"Commands: {links}.\n")
        for name, child in shown:
            _command(child, Context(child, info_name=name, parent=context), parts)


def _help(command: Command) -> str:
    """The command's help, paragraphs kept, lines within a paragraph joined."""
    text = (command.help or command.short_help or "").strip()
    paragraphs = [
        " ".join(line.strip() for line in block.splitlines()) for block in text.split("\n\n")
    ]
    return "\n\n".join(p for p in paragraphs if p)


def _row(param: Parameter, context: Context) -> str:
    if isinstance(param, TyperOption):
        names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
        kind = "flag" if param.is_flag else _type(param, context)
    else:
        names = f"`{(param.name or '').upper()}`"
        kind = _type(param, context)
    if param.multiple or param.nargs == -1:
        kind += ", repeatable"
    help_text = getattr(param, "help", None) or ""
    return f"| {names} | {kind} | {_default(param)} | {_cell(help_text)} |"


def _type(param: Parameter, context: Context) -> str:
    shown = str(param.display_type(context)).strip("<>")  # type: ignore[attr-defined]
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None or high is not None:
        shown += f" ({'' if low is None else low}..{'' if high is None else high})"
    return shown


def _default(param: Parameter) -> str:
    if param.required:
        return "required"
    value = param.default
    if value is None or value is False or value in ((), []):
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(f"`{item}`" for item in value)
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _anchor(path: str, name: str) -> str:
    """The anchor MkDocs gives the heading ``## PATH NAME``: lowercase words joined by ``-``."""
    words = f"{path} {name}".lower().split()
    return "-".join("".join(c for c in word if c.isalnum() or c in "-_") for word in words)


if __name__ == "__main__":
    sys.stdout.write(render())
