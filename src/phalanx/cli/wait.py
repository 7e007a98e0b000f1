"""``phalanx wait job|run NAME --for phase=PHASE [--timeout 60s]``: as ``kubectl wait``.

Prints ``job/NAME condition met (PHASE)`` (``run/ID ...``) and exits 0 once the job (run)
is in a phase asked for; exits 1 with one ``error:`` line naming it, its phase and the
phases waited for when the timeout passes, or at once when it ended in another phase
(for a run: naming each failed step and why it failed).
"""

from __future__ import annotations

import typer

from phalanx.cli.remote import connect, fail
from phalanx.domain.errors import DocumentError
from phalanx.spec.common import parse_duration

app = typer.Typer(help="Wait until a job or a run reaches a phase.", no_args_is_help=True)

_FOR_FIX = "write --for phase=Succeeded (several: phase=Succeeded,Failed, or repeat --for)"
_FOR_HELP = "phase=PHASE[,PHASE...]: any of these phases ends the wait (repeatable)."
_TIMEOUT_HELP = "How long at most: 90, 30s, 10m, 1h."


def wait_job(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The job."),
    conditions: list[str] = typer.Option(["phase=Succeeded"], "--for", help=_FOR_HELP),
    timeout: str = typer.Option("5m", "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Wait until job NAME is in one of the phases given with --for."""
    seconds = duration("--timeout", timeout)
    phases = [phase for condition in conditions for phase in _phases(condition)]
    with connect(ctx) as client:
        job = client.wait(name, phases, timeout=seconds)
    typer.echo(f"job/{name} condition met ({job.phase})")


def wait_run(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The run."),
    conditions: list[str] = typer.Option(["phase=Succeeded"], "--for", help=_FOR_HELP),
    timeout: str = typer.Option("5m", "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Wait until run RUN is in one of the phases given with --for (Pending, Running,
    Succeeded, Failed, Cancelled)."""
    seconds = duration("--timeout", timeout)
    phases = [phase for condition in conditions for phase in _phases(condition)]
    with connect(ctx) as client:
        run = client.wait_run(run_id, phases, timeout=seconds)
    typer.echo(f"run/{run_id} condition met ({run.phase})")


def duration(option: str, text: str) -> float:
    """Seconds in ``text`` given to ``option``; a bad one ends the command with an
    ``error:`` line naming the option."""
    try:
        return parse_duration(text)
    except DocumentError as error:
        said = str(error)
        fail(
            f"{option}: {said}"
            if not error.fix or error.fix in said
            else f"{option}: {said}; fix: {error.fix}"
        )


def _phases(condition: str) -> list[str]:
    key, equals, value = condition.partition("=")
    if key.strip().lower() != "phase" or not equals or not value.strip():
        fail(f"--for: {condition!r} is not a condition; fix: {_FOR_FIX}")
    return [phase for phase in value.split(",") if phase.strip()]


app.command("job")(wait_job)
app.command("jobs", hidden=True)(wait_job)
app.command("run")(wait_run)
app.command("runs", hidden=True)(wait_run)
