"""Commands imported when they run: ``phalanx get jobs`` loads ``cli.get`` and what it
needs, not the simulator, the engine or the server.

``COMMANDS`` names every top-level command: its module under ``phalanx.cli`` and the
attribute there (a function, or a ``typer.Typer`` of subcommands). A command is built
once per group, the first time it is asked for; ``phalanx --help`` lists them all, so
it imports every one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import typer
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_group
from typer.models import CommandInfo

if TYPE_CHECKING:  # Typer's vendored click, named only for types
    from typer._click.core import Command, Context


@dataclass(frozen=True, slots=True)
class Lazy:
    """Where a command lives: its module under ``phalanx.cli`` and the attribute there."""

    module: str
    attribute: str


#: Every top-level command, in the order ``--help`` lists them: commands, then groups.
COMMANDS: Final[dict[str, Lazy]] = {
    "up": Lazy("up", "up"),
    "gateway": Lazy("gateway", "gateway"),
    "apply": Lazy("apply", "apply"),
    "logs": Lazy("logs", "logs"),
    "cancel": Lazy("delete", "cancel"),
    "scale": Lazy("scale", "scale"),
    "rollout": Lazy("rollout", "rollout"),
    "cordon": Lazy("cordon", "cordon"),
    "uncordon": Lazy("cordon", "uncordon"),
    "drain": Lazy("cordon", "drain"),
    "usage": Lazy("usage", "usage"),
    "priority": Lazy("priority", "priority"),
    "demo": Lazy("demo", "demo"),
    "version": Lazy("version", "version"),
    "get": Lazy("get", "app"),
    "describe": Lazy("describe", "app"),
    "delete": Lazy("delete", "app"),
    "top": Lazy("top", "app"),
    "users": Lazy("users", "app"),
    "token": Lazy("users", "tokens"),
    "bench": Lazy("bench", "app"),
    "sim": Lazy("sim", "app"),
    "wait": Lazy("wait", "app"),
    "pipeline": Lazy("pipeline", "app"),
    "cache": Lazy("cache", "app"),
    "secret": Lazy("secrets", "app"),
    "dataset": Lazy("datasets", "app"),
    "tune": Lazy("tunings", "app"),
}


def load(name: str, lazy: Lazy) -> Command:
    """The click command of ``lazy``, its module imported now."""
    found: Any = getattr(importlib.import_module(f"phalanx.cli.{lazy.module}"), lazy.attribute)
    if isinstance(found, typer.Typer):
        command: Command = get_group(found)
    else:
        info = CommandInfo(name=name, callback=found)
        command = get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode="rich")
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """A Typer group whose ``COMMANDS`` are imported when first asked for."""

    def list_commands(self, ctx: Context) -> list[str]:
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load(cmd_name, COMMANDS[cmd_name])
        return super().get_command(ctx, cmd_name)
