"""``phalanx priority``: each waiting job's multifactor priority, as Slurm's ``sprio``.

One row per job waiting to start (Pending or Queued) as of the scheduler's last tick,
by queue, highest priority first: JOB USER QUEUE PRIORITY AGE FAIRSHARE SIZE CLASS,
each factor shown weighted (factor times its weight: the part it adds to PRIORITY).
``-o wide`` adds each raw factor (0..1) and its weight; ``-o json``/``yaml`` print the
API's answer. A user sees their own jobs; an admin everyone's (``--user``: one user's).
"""

from __future__ import annotations

import typer
from rich.table import Table

from phalanx.cli.remote import OUTPUT_OPTION, Output, connect, console, emit, machine, print_table
from phalanx.client import JobPriorityView, PriorityListView

#: The factors in column order: (column, the field of the factors and weights).
COLUMNS = (("AGE", "age"), ("FAIRSHARE", "fair_share"), ("SIZE", "size"), ("CLASS", "priority"))

#: Said instead of a table when the server's scheduler orders no job by these factors.
NO_FAIRSHARE = (
    "the server's scheduler has no fairshare plugin: no job has multifactor priority "
    "factors (add {name: fairshare} to a tier of its SchedulerConfig, as phalanx-default does)"
)


def priority(
    ctx: typer.Context,
    queue: str | None = typer.Option(None, "--queue", help="Only jobs of this queue."),
    user: str | None = typer.Option(None, "--user", help="Only this user's jobs (admins)."),
    output: Output | None = OUTPUT_OPTION,
) -> None:
    """Waiting jobs' priority factors (age, fair-share, size, class), weighted, highest
    first in each queue; your own jobs, or everyone's for an admin."""
    with connect(ctx) as client:
        view = client.priority(queue=queue, user=user)
    if machine(output):
        assert output is not None
        emit(view, output)
    elif not view.fairshare:
        console().print(NO_FAIRSHARE, highlight=False, markup=False)
    else:
        print_table(table(view, wide=output is Output.WIDE))


def table(view: PriorityListView, *, wide: bool = False) -> Table:
    """One row per job: each factor weighted (``wide``: then raw, with its weight)."""
    shown = Table(box=None, pad_edge=False)
    for name in ("JOB", "USER", "QUEUE"):
        shown.add_column(name)
    shown.add_column("PRIORITY", justify="right")
    for name, _ in COLUMNS:
        shown.add_column(name, justify="right")
    if wide:
        for name, _ in COLUMNS:
            shown.add_column(f"{name} (RAW x W)", justify="right")
    for job in view.items:
        cells = [job.name, job.user, job.queue, f"{job.total:.4f}"]
        cells += [f"{weighted(job, field):.4f}" for _, field in COLUMNS]
        if wide:
            cells += [
                f"{getattr(job.factors, field):.4f} x{getattr(job.weights, field):g}"
                for _, field in COLUMNS
            ]
        shown.add_row(*cells)
    return shown


def weighted(job: JobPriorityView, field: str) -> float:
    """What factor ``field`` adds to the job's priority: the factor times its weight."""
    return float(getattr(job.factors, field)) * float(getattr(job.weights, field))
