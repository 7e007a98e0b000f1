"""``phalanx pipeline run NAME [-p key=value ...]``, ``phalanx pipeline resume RUN
[--from STEP] [-p key=value ...]`` and ``phalanx pipeline stop RUN``.

``run`` and ``resume`` print the new run's id alone on stdout
(``RUN=$(phalanx pipeline run tri)``). ``run --wait`` then waits for the run to end:
``run/ID Succeeded`` on stderr and exit 0, or one ``error:`` line naming each failed
step and why it failed (or why the run was cancelled) and exit 1; ``--timeout`` bounds
the wait (the run goes on when it passes, as it does on Ctrl-C).
A ``-p`` that is not ``key=value``, names no param of the pipeline, or does not read as
the param's type is refused with one ``error:`` line naming ``params.NAME`` and the fix,
and no run is made.
"""

from __future__ import annotations

import math

import typer

from phalanx.cli.remote import connect, reported
from phalanx.cli.wait import duration
from phalanx.client import Client
from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline.params import parse_assignments

app = typer.Typer(help="Run pipelines registered with phalanx apply.", no_args_is_help=True)


@app.command("run")
def run(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The pipeline."),
    params: list[str] | None = typer.Option(
        None, "--param", "-p", help="A param's value: -p lr=0.1 (repeatable)."
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Neither read nor write the step cache."
    ),
    refresh_cache: bool = typer.Option(
        False, "--refresh-cache", help="Do not read the step cache; write it anew."
    ),
    wait: bool = typer.Option(
        False, "--wait", help="Wait for the run to end; exit 1 if it did not succeed."
    ),
    timeout: str | None = typer.Option(
        None, "--timeout", help="With --wait: how long at most (30s, 10m, 2h; default: no limit)."
    ),
) -> None:
    """Start a run of a pipeline; prints the run's id (with --wait, then waits for it)."""
    with reported():
        given = parse_assignments(params or ())
        if no_cache and refresh_cache:
            raise InvalidInput(
                "--no-cache and --refresh-cache contradict each other",
                field="cache",
                fix="give one of them",
            )
    mode = "off" if no_cache else "refresh" if refresh_cache else "use"
    seconds = math.inf if timeout is None else duration("--timeout", timeout)
    with connect(ctx) as client:
        view = client.run_pipeline(name, dict(given), cache=mode)
        typer.echo(view.id)
        if wait:
            _wait_for_end(client, view.id, seconds)


def _wait_for_end(client: Client, run_id: str, timeout: float) -> None:
    """Wait for run ``run_id`` to succeed; a run that ended otherwise raises ``RunEnded``
    (the caller's ``connect`` turns it into the ``error:`` line)."""
    try:
        ended = client.wait_run(run_id, "Succeeded", timeout=timeout)
    except KeyboardInterrupt:
        typer.echo(f"note: run/{run_id} goes on: phalanx wait run {run_id}", err=True)
        raise typer.Exit(130) from None
    typer.echo(f"run/{run_id} {ended.phase}", err=True)


@app.command("resume")
def resume(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The ended run to resume."),
    from_step: str | None = typer.Option(
        None, "--from", help="Rerun this step and everything downstream of it."
    ),
    params: list[str] | None = typer.Option(
        None, "--param", "-p", help="A param's new value: -p lr=0.1 (repeatable)."
    ),
) -> None:
    """Start a new run linked to RUN that reuses its successful steps (their outputs and
    artifacts) before the failed one, or before --from, and runs the rest; prints its id."""
    with reported():
        given = parse_assignments(params or ())
    with connect(ctx) as client:
        view = client.resume_run(run_id, from_step=from_step, params=dict(given))
    typer.echo(view.id)


@app.command("stop")
def stop(ctx: typer.Context, run_id: str = typer.Argument(..., help="The run.")) -> None:
    """Stop a run: running steps' jobs are cancelled, finally steps run, then Cancelled."""
    with connect(ctx) as client:
        view = client.stop_run(run_id)
    typer.echo(f"run/{view.id} {'already ' + view.phase if view.finished_at else 'stopping'}")
