"""``phalanx logs JOB [TASK | --all] [-f] [--stderr] [--tail N] [--since D]``: task
output, as it was written.

One task's output is printed as it is. ``--all`` prints every task's output, each line
as ``TASK | line`` (as ``kubectl logs --prefix`` does); with ``-f`` the lines of
different tasks interleave as they come, and a line is never printed half.

A job (or task) that has not started yet has no output: a note on stderr says so, and
with ``-f`` that the command waits for the start, then follows. A followed job that
ended Failed or Cancelled (one that never started included) ends the command with an
``error:`` line saying so and why, and exit code 1; a Succeeded one ends it quietly. When a task ran more
than once (a retry), each later run's output begins with a line
``--- attempt N (retry after: ...) ---`` (written by the executor as the run starts).

``--tail N`` prints the last N lines of each task's output (within its last MiB), then
follows with ``-f``. A task's lines carry no time stamps (the task writes its output
straight to a file), so ``--since D`` counts from each task's start: a task whose
current run started within D shows its output, one that started earlier (or has not
started) shows none of what it wrote so far (with ``-f``, what it writes from now on),
and a note on stderr names it.

Nothing printed is never the whole answer: a task that started but whose log the server
cannot find where it looks (it was restarted with another ``--tasks-dir``, or the file
was removed) is an ``error:`` line naming where it looked and, where the server knows,
where the log was written (with ``--all``: a ``warning:`` line per such task, and the
others' output); output the server left out is a ``warning:`` line; and a task that
wrote nothing gets a ``note:`` saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Literal

import typer

from phalanx.cli.remote import connect, fail
from phalanx.cli.wait import duration
from phalanx.client import Client, ClientError, JobView

_ENDED = ("Succeeded", "Failed", "Cancelled")
_WAITING = ("Pending", "Queued")
_TASK_WAITING = ("Pending", "Bound")


def logs(
    ctx: typer.Context,
    job: str = typer.Argument(..., help="The job."),
    task: str | None = typer.Argument(None, help="The task (default: the job's first)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until it ends."),
    stderr: bool = typer.Option(False, "--stderr", help="The task's stderr instead of stdout."),
    all_tasks: bool = typer.Option(
        False, "--all", help="Every task's output, each line prefixed with 'TASK | '."
    ),
    lines: int | None = typer.Option(
        None,
        "--tail",
        min=-1,
        help="Only the last N lines of each task's output (-1: all, within its last MiB).",
    ),
    since: str | None = typer.Option(
        None,
        "--since",
        help="Only tasks whose current run started within this long (5m, 1h): lines carry "
        "no time stamps, so the others show nothing written so far.",
    ),
) -> None:
    """Print a task's stdout (or stderr), or with --all every task's; with -f, follow it
    until the job ends."""
    if all_tasks and task is not None:
        fail(
            f"--all prints every task of {job}, but task {task!r} was named too; "
            "fix: leave out TASK to print every task, or --all to print one"
        )
    seconds = None if since is None else duration("--since", since)
    stream: Literal["stdout", "stderr"] = "stderr" if stderr else "stdout"
    with connect(ctx) as client:
        view = client.job(job)
        waiting = not_started(view, None if all_tasks else task)
        if waiting:
            then = (
                "waiting for it to start, then following its output (Ctrl-C to stop)"
                if follow
                else f"no output yet; phalanx logs -f {job} waits for the start and follows"
            )
            typer.echo(f"note: {waiting}: {then}", err=True)
        chunks = client.logs(
            job,
            task,
            stream=stream,
            follow=follow,
            all_tasks=all_tasks,
            lines=None if lines == -1 else lines,
            since=seconds,
        )
        for warning in chunks.warnings:
            typer.echo(f"warning: {warning}", err=True)
        wrote = _print(chunks)
        if follow:
            _check_ended(client, job)
        elif not (wrote or waiting or chunks.warnings or lines == 0):
            shown = None if all_tasks else task or ""
            typer.echo(f"note: {nothing(view, shown, stream)}", err=True)


def _print(chunks: Iterable[str]) -> bool:
    """Print ``chunks`` as they come; whether any held text. Ctrl-C ends with 130."""
    wrote = False
    try:
        for chunk in chunks:
            wrote = wrote or bool(chunk)
            sys.stdout.write(chunk)
            sys.stdout.flush()
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    return wrote


def nothing(job: JobView, task: str | None, stream: str) -> str:
    """Why nothing of ``job``'s ``task`` (None: of every task; "": its first) was
    printed: it never started, or it wrote nothing (yet)."""
    if job.phase in _ENDED and job.started_at is None:
        why = f" ({job.reason})" if job.reason else ""
        return f"job {job.name} ended {job.phase}{why} before it started: it wrote no output"
    if task is None:
        return f"no task of job {job.name} has written anything to its {stream}"
    shown = next((t for t in job.tasks if t.name == task), None) if task else None
    shown = shown or (job.tasks[0] if job.tasks and not task else None)
    name = shown.name if shown is not None else task
    if shown is not None and shown.started_at is None and job.phase in _ENDED:
        return f"task {name} did not run before job {job.name} ended {job.phase}: no output"
    return f"task {name} has written nothing to its {stream}"


def not_started(job: JobView, task: str | None) -> str | None:
    """Why ``job`` (its ``task``; None: the job as a whole, or its first task) has no
    output yet, or None when it has started."""
    if job.started_at is None and job.phase in _WAITING:
        why = f" ({job.reason}: {job.message})" if job.reason and job.message else ""
        return f"job {job.name} has not started yet: it is {job.phase}{why}"
    shown = next((t for t in job.tasks if t.name == task), None) if task else None
    if shown is not None and shown.started_at is None and shown.phase in _TASK_WAITING:
        return f"task {shown.name} has not started yet: it is {shown.phase}"
    return None


def _check_ended(client: Client, job: str) -> None:
    """A followed log ends when its job has ended, or when the server stops: say which
    when it is the server (it may be gone, or going)."""
    stopped = (
        f"the server stopped sending job {job}'s output before the job ended "
        "(it is shutting down or restarting)"
    )
    fix = f"once the server is back, run phalanx logs -f {job} again"
    try:
        view = client.job(job)
    except ClientError as error:
        if error.status == 404:  # ended, and deleted since (a delete while it ran)
            return
        if error.status is not None:
            raise
        fail(f"{stopped}; fix: {fix}")
    if view.phase not in _ENDED:
        fail(f"{stopped}; job {job} is {view.phase}; fix: {fix}")
    if view.phase != "Succeeded":
        why = f" ({view.reason}): {view.message}" if view.message else ""
        fail(f"job {job} ended {view.phase}{why}; fix: phalanx describe job {job}")
