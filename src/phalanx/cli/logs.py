"""``phalanx logs JOB [TASK] [-f] [--stderr]``: a task's output, as it was written."""

from __future__ import annotations

import sys

import typer

from phalanx.cli.remote import connect


def logs(
    ctx: typer.Context,
    job: str = typer.Argument(..., help="The job."),
    task: str | None = typer.Argument(None, help="The task (default: the job's first)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until it ends."),
    stderr: bool = typer.Option(False, "--stderr", help="The task's stderr instead of stdout."),
) -> None:
    """Print a task's stdout (or stderr); with -f, follow it until the task ends."""
    with connect(ctx) as client:
        chunks = client.logs(job, task, stream="stderr" if stderr else "stdout", follow=follow)
        try:
            for chunk in chunks:
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
