"""``phalanx logs JOB [TASK | --all] [-f] [--stderr]``: task output, as it was written.

One task's output is printed as it is. ``--all`` prints every task's output, each line
as ``TASK | line`` (as ``kubectl logs --prefix`` does); with ``-f`` the lines of
different tasks interleave as they come, and a line is never printed half.

A job (or task) that has not started yet has no output: a note on stderr says so, and
with ``-f`` that the command waits for the start, then follows. A followed job that
ended Failed or Cancelled (one that never started included) ends the command with an
``error:`` line saying so and why, and exit code 1; a Succeeded one ends it quietly. When a task ran more
than once (a retry), each later run's output begins with a line
``--- attempt N (retry after: ...) ---`` (written by the executor as the run starts).
"""

from __future__ import annotations

import sys

import typer

from phalanx.cli.remote import connect, fail
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
) -> None:
    """Print a task's stdout (or stderr), or with --all every task's; with -f, follow it
    until the job ends."""
    if all_tasks and task is not None:
        fail(
            f"--all prints every task of {job}, but task {task!r} was named too; "
            "fix: leave out TASK to print every task, or --all to print one"
        )
    with connect(ctx) as client:
        waiting = not_started(client.job(job), None if all_tasks else task)
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
            stream="stderr" if stderr else "stdout",
            follow=follow,
            all_tasks=all_tasks,
        )
        try:
            for chunk in chunks:
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        if follow:
            _check_ended(client, job)


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
