"""``phalanx tune -f FILE``, ``phalanx tune apply|stop NAME``, and the tables of ``get
tunings`` and ``describe tuning``.

``tune -f`` starts the Tuning documents of FILE (as ``apply`` does) and prints one line
per tuning, ``tuning/NAME created`` (or ``unchanged``); ``tune apply NAME`` writes the
best trial's spec into the service it tuned and prints ``inference/SERVICE configured
from tuning/NAME trial N``; ``tune stop NAME`` prints ``tuning/NAME PHASE``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from phalanx.cli.remote import connect, reported
from phalanx.cli.render import age, phase
from phalanx.client import TrialView, TuningView, prepare_documents

app = typer.Typer(
    help="Right-size an inference service by measurement: start a Tuning (tune -f FILE), "
    "write its best spec into the service (tune apply NAME), or end it (tune stop NAME).",
    invoke_without_command=True,
)


@app.callback()
def tune(
    ctx: typer.Context,
    file: Path | None = typer.Option(
        None, "-f", "--filename", help="A file of Tuning documents ('-': standard input)."
    ),
) -> None:
    """Start the tunings of FILE: each runs trials, replicas of its predictor with one
    candidate spec each, and keeps the best (phalanx describe tuning NAME)."""
    if ctx.invoked_subcommand is not None:
        return
    if file is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    with reported():
        documents = (
            prepare_documents(sys.stdin.read(), source="<stdin>")
            if str(file) == "-"
            else prepare_documents(file)
        )
    kinds = {document.kind for document in documents}
    if kinds != {"Tuning"}:
        others = ", ".join(sorted(kinds - {"Tuning"}))
        raise typer.BadParameter(
            f"{file} holds {others} documents; tune starts Tuning documents only "
            "(phalanx apply -f sends the others)",
            param_hint="-f",
        )
    with connect(ctx) as client:
        for applied in client.apply_prepared(documents):
            typer.echo(f"tuning/{applied.name} {applied.action}")


@app.command("apply")
def apply_best(ctx: typer.Context, name: str = typer.Argument(..., help="The tuning.")) -> None:
    """Write a tuning's best spec (its resources and variables) into the service it tuned;
    the service's replicas are replaced with ones of that spec."""
    with connect(ctx) as client:
        best = client.tuning(name).best
        service = client.apply_tuning(name)
    trial = "" if best is None else f" trial {best.number}"
    typer.echo(f"inference/{service.name} configured from tuning/{name}{trial}")


@app.command("stop")
def stop(ctx: typer.Context, name: str = typer.Argument(..., help="The tuning.")) -> None:
    """End a tuning now: its trials under way stop; what they measured stays."""
    with connect(ctx) as client:
        view = client.stop_tuning(name)
    typer.echo(f"tuning/{name} {view.phase}")


def tunings_table(tunings: Sequence[TuningView], now: float) -> Table:
    """One row per tuning: its service, phase, trials (ended/all asked), the best so far
    and its value, and its age."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "TUNES", "PHASE", "TRIALS", "BEST", "VALUE", "AGE"):
        table.add_column(title, overflow="fold")
    for tuning in tunings:
        spec = _spec(tuning)
        ended = sum(1 for t in tuning.trials if t.ended_at is not None)
        best = tuning.best
        table.add_row(
            tuning.name,
            str(spec.get("inference") or f"job ({spec.get('role') or 'first role'})"),
            phase(tuning.phase),
            f"{ended}/{spec.get('trials', '?')}",
            "-" if best is None else params_text(best.params),
            "-" if best is None or best.value is None else f"{best.value:.4g}",
            age(tuning.created_at, now),
        )
    return table


def trials_table(tuning: TuningView) -> Table:
    """One row per trial: its number (the best marked *), candidate, state, node, what
    it measured at its highest rate (requests/s, p50 and p99, error rate), cost and
    value (``misses`` when it fell short of the SLO)."""
    table = Table(box=None, pad_edge=False)
    titles = ("#", "PARAMS", "STATE", "NODE", "REQ/S", "P50", "P99", "ERRORS", "COST", "VALUE")
    for title in titles:
        table.add_column(title, overflow="fold")
    best = None if tuning.best is None else tuning.best.number
    for trial in tuning.trials:
        last = trial.metrics[-1] if trial.metrics else {}
        table.add_row(
            f"{trial.number}{' *' if trial.number == best else ''}",
            params_text(trial.params),
            phase(trial.state),
            trial.node or "-",
            _number(last.get("throughput"), "{:.1f}"),
            _millis(last.get("p50")),
            _millis(last.get("p99")),
            _number(last.get("error_rate"), "{:.1%}"),
            _number(trial.cost, "{:.3g}"),
            _value(trial),
        )
    return table


def trial_notes(tuning: TuningView) -> list[str]:
    """One line per trial with something to say: why it ended as it did, or what it
    fell short of (``trial 2: p99 0.31 s over the SLO 0.15 s at 10 requests/s``)."""
    return [f"trial {t.number}: {t.message}" for t in tuning.trials if t.message]


def objective_text(objective: Mapping[str, Any]) -> str:
    """``cheapest with p99 <= 250ms at 20 req/s`` or ``throughputPerCost over 10, 20, 40
    req/s (p99 <= 250ms)``."""
    if objective.get("goal") == "samplesPerGpu":
        return "the most samples/s per GPU the job reports"
    p99 = objective.get("latencyP99")
    slo = "" if not isinstance(p99, int | float) else f"p99 <= {p99 * 1000:g}ms"
    if objective.get("goal", "cheapest") == "cheapest":
        rate = objective.get("rate")
        return f"cheapest with {slo} at {rate:g} req/s" if isinstance(rate, int | float) else slo
    rates = ", ".join(f"{r:g}" for r in objective.get("rates", []))
    return f"throughputPerCost over {rates} req/s" + (f" ({slo})" if slo else "")


def params_text(params: Mapping[str, Any]) -> str:
    """``cpu=1 memory=1Gi OMP_NUM_THREADS=2``."""
    return " ".join(f"{key}={value}" for key, value in params.items())


def _value(trial: TrialView) -> str:
    if trial.value is None:
        return "-"
    return f"{trial.value:.4g}" + ("" if trial.feasible else " (misses)")


def _number(value: Any, form: str) -> str:
    return "-" if not isinstance(value, int | float) else form.format(value)


def _millis(seconds: Any) -> str:
    return "-" if not isinstance(seconds, int | float) else f"{seconds * 1000:.1f}ms"


def _spec(tuning: TuningView) -> Mapping[str, Any]:
    spec = tuning.document.get("spec")
    return spec if isinstance(spec, Mapping) else {}
