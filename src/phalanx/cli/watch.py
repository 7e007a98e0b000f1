"""``phalanx get jobs|runs -w``: the listing, then its rows again as they change.

As ``kubectl get -w``: the table is printed once with its header; then the server is
read every ``WATCH_INTERVAL`` seconds and a row (without a header) is printed for
every object that is new or that the server answers differently than when it was last
printed, as kubectl prints a row for every update (time passing, which only moves AGE
or a running DURATION, is no change: no field holds it). An object that is gone
(deleted) is printed once more with the phase ``Deleted``. It goes on until Ctrl-C
(exit status 130) or until the server cannot be read (an ``error:`` line, exit 1).

With ``-o json`` every object, then every changed one, is one JSON object on a line of
its own (JSON Lines, as ``jq`` reads them); with ``-o yaml`` each is a YAML document
opened by ``---``. A deleted object is printed with its ``phase`` ``Deleted``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Final, NoReturn, TypeVar

import typer
import yaml
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
    first: Sequence[V],
    *,
    key: Callable[[V], str],
    table: Callable[[Sequence[V], float], Table],
    output: Output | None,
    empty: str,
) -> NoReturn:
    """Print ``first`` (what the caller has read already), then every change of what
    ``read()`` gives, until Ctrl-C (see the module's guarantees). ``table(views, now)``
    draws rows; ``empty`` is the note printed when there is nothing yet."""
    try:
        _print(first, table, output, header=True)
        if not first:
            typer.echo(f"{empty}: watching for changes (Ctrl-C to stop)", err=True)
        shown = {key(view): view for view in first}
        while True:
            sleep(WATCH_INTERVAL)
            seen = {key(view): view for view in read()}
            changed = [view for name, view in seen.items() if shown.get(name) != view]
            changed += [
                last.model_copy(update={"phase": DELETED})
                for name, last in shown.items()
                if name not in seen
            ]
            _print(changed, table, output, header=False)
            shown = seen
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


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
