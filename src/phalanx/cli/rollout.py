"""``phalanx rollout NAME --to vN``: move a predictor's traffic to another model version
in steps, promoted after each step's window and rolled back by itself when the new
version's error rate or p99 latency passes the thresholds; ``--abort`` stops one.

``--wait`` follows the rollout until it ends, printing each step as it is taken, and
exits 1 when it was rolled back (as ``kubectl argo rollouts status`` does), so a script
can gate on it.
"""

from __future__ import annotations

import time
from typing import Final

import typer

from phalanx.cli.remote import connect, fail
from phalanx.cli.wait import duration
from phalanx.client import Client, RolloutStepView, RolloutView

#: Seconds between two looks at a rollout being followed.
_POLL: Final = 1.0


def rollout(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The inference service."),
    to: str | None = typer.Option(
        None, "--to", help="The version: vN (the predictor's own model), NAME:vN or NAME."
    ),
    predictor: str | None = typer.Option(
        None, "--predictor", help="The predictor to roll (default: the only one)."
    ),
    steps: str | None = typer.Option(
        None, "--steps", help="The new version's traffic share at each step (default 10,50,100)."
    ),
    interval: str | None = typer.Option(
        None, "--interval", help="How long each step lasts before it is judged (default 60s)."
    ),
    max_error_rate: str | None = typer.Option(
        None, "--max-error-rate", help="The most 5xx answers allowed, as 1% or 0.01 (default 1%)."
    ),
    max_p99: str | None = typer.Option(
        None, "--max-p99", help="The highest p99 latency allowed, in seconds (default: not judged)."
    ),
    min_requests: int | None = typer.Option(
        None, "--min-requests", help="The fewest requests a step needs to be judged (default 20)."
    ),
    ready_timeout: str | None = typer.Option(
        None, "--ready-timeout", help="How long the new version may have no Ready replica (5m)."
    ),
    abort: bool = typer.Option(False, "--abort", help="Stop the rollout under way (roll back)."),
    wait: bool = typer.Option(
        False, "--wait", help="Follow it until it ends; exit 1 if it was rolled back."
    ),
) -> None:
    """Roll a predictor of service NAME to another model version in steps (or stop the
    rollout under way with --abort); phalanx describe inference NAME shows its history."""
    with connect(ctx) as client:
        if abort:
            if to is not None:
                fail("--abort and --to: give one of them")
            found = client.abort_rollout(name)
            typer.echo(
                f"inference/{name} rollout {found.id} stopping: rolled back to {found.from_version}"
            )
        else:
            if to is None:
                fail("--to: give the version to roll out (e.g. --to v2), or --abort")
            found = client.rollout(
                name,
                to,
                predictor=predictor,
                steps=None if steps is None else _steps(steps),
                interval=None if interval is None else duration("--interval", interval),
                max_error_rate=None if max_error_rate is None else _share(max_error_rate),
                max_p99=None if max_p99 is None else duration("--max-p99", max_p99),
                min_requests=min_requests,
                ready_timeout=None
                if ready_timeout is None
                else duration("--ready-timeout", ready_timeout),
            )
            typer.echo(
                f"inference/{name} rollout {found.id} started: {found.predictor} to "
                f"{found.to_version}, steps {','.join(map(str, found.steps))} every "
                f"{found.interval_seconds:g} s"
            )
        if wait:
            _follow(client, name, found)


def _follow(client: Client, name: str, rollout: RolloutView) -> None:
    """Print each new history entry of ``rollout`` until it ends; exit 1 if rolled back."""
    shown = len(rollout.history)
    while rollout.phase == "Progressing":
        time.sleep(_POLL)
        found = [r for r in client.inference(name).rollouts if r.id == rollout.id]
        if not found:
            fail(f"rollout {rollout.id} of {name} is gone (the service was deleted)")
        rollout = found[0]
        for entry in rollout.history[shown:]:
            typer.echo(step_line(entry))
        shown = len(rollout.history)
    typer.echo(f"inference/{name} rollout {rollout.id} {rollout.phase}: {rollout.reason}")
    if rollout.phase != "Succeeded":
        raise typer.Exit(1)


def step_line(entry: RolloutStepView) -> str:
    """One history entry as a line: when, what, the traffic after it, the window's
    figures and why."""
    when = time.strftime("%H:%M:%S", time.localtime(entry.at))
    figures = ""
    if entry.requests:
        p99 = "" if entry.p99_seconds is None else f", p99 {entry.p99_seconds * 1000:.0f} ms"
        figures = f" ({entry.requests} requests, {entry.errors} errors{p99})"
    return f"{when}  {entry.action:<11} {entry.traffic:>3}%{figures}  {entry.reason}"


def _steps(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(
            f"--steps: {text!r} is not a list of shares; fix: write rising percents, e.g. 10,50,100"
        )


def _share(text: str) -> float:
    said = text.strip()
    try:
        return float(said[:-1]) / 100 if said.endswith("%") else float(said)
    except ValueError:
        fail(f"--max-error-rate: {text!r} is not a share; fix: write 1% or 0.01")
