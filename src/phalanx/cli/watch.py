"""``phalanx get jobs|runs -w``: the listing, then its rows again as they change.

As ``kubectl get -w``: the table is printed once with its header; then the server is
read every ``WATCH_INTERVAL`` seconds and a row (without a header) is printed for
every object that is new or whose shown columns changed since it was last printed (a
column that only counts time, AGE or a running DURATION, is not a change). An object
that is gone (deleted) is printed once more with the phase ``Deleted``. It goes on
until Ctrl-C (exit status 130) or until the server cannot be read (an ``error:`` line,
exit 1).

With ``-o json`` every object, then every changed one, is one JSON object on a line of
its own (JSON Lines, as ``jq`` reads them); with ``-o yaml`` each is a YAML document
opened by ``---``. A deleted object is printed with its ``phase`` ``Deleted``.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Sequence
from typing import Final, NoReturn, TypeVar

import typer
import yaml
from rich.console import Console
from rich.table import Table

from phalanx.cli.machine import written
from phalanx.cli.remote import Output, machine, print_table
from phalanx.client import JobSummaryView, RunView

#: Seconds between two reads of the server while watching.
WATCH_INTERVAL: Final = 1.0
#: The phase a gone object is printed with, once.
DELETED: Final = "Deleted"

V = TypeVar("V", JobSummaryView, RunView)

#: How the watch waits between reads (tests replace it to act between two reads).
sleep: Callable[[float], None] = time.sleep


def watch(
    read: Callable[[], Sequence[V]],
    *,
    key: Callable[[V], str],
    table: Callable[[Sequence[V], float], Table],
    since: Callable[[V], float],
    output: Output | None,
    empty: str,
) -> NoReturn:
    """Print what ``read()`` gives, then every change of it, until Ctrl-C (see the
    module's guarantees). ``table(views, now)`` draws rows; ``since(view)`` is the time a
    row's time columns count from, so that a row drawn at that time shows what changes
    apart from them; ``empty`` is the note printed when there is nothing yet."""
    shown: dict[str, tuple[V, str]] = {}
    try:
        views = read()
        _print(views, table, output, header=True)
        if not views:
            typer.echo(f"{empty}: watching for changes (Ctrl-C to stop)", err=True)
        shown = {key(v): (v, _signature(v, table, since)) for v in views}
        while True:
            sleep(WATCH_INTERVAL)
            views = read()
            changed: list[V] = []
            seen: dict[str, tuple[V, str]] = {}
            for view in views:
                signature = _signature(view, table, since)
                seen[key(view)] = (view, signature)
                if shown.get(key(view), (None, None))[1] != signature:
                    changed.append(view)
            changed += [
                last.model_copy(update={"phase": DELETED})
                for name, (last, _) in shown.items()
                if name not in seen
            ]
            _print(changed, table, output, header=False)
            shown = seen
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _signature(
    view: V, table: Callable[[Sequence[V], float], Table], since: Callable[[V], float]
) -> str:
    """The row of ``view`` as text, drawn at ``since(view)``: equal for two views that
    differ in no shown column."""
    out = io.StringIO()
    Console(file=out, width=10_000, color_system=None).print(table([view], since(view)))
    return out.getvalue()


def _print(
    views: Sequence[V],
    table: Callable[[Sequence[V], float], Table],
    output: Output | None,
    *,
    header: bool,
) -> None:
    if not views:
        return
    if machine(output):
        for view in views:
            plain = written(view.model_dump(mode="json"))
            if output is Output.JSON:
                typer.echo(json.dumps(plain))
            else:
                typer.echo(
                    "---\n" + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True), nl=False
                )
        return
    drawn = table(views, time.time())
    drawn.show_header = header
    print_table(drawn)
