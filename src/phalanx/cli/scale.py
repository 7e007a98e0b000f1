"""``phalanx scale JOB N``: the size an owner asks of a job's elastic role.

The size is where the job goes now, not a bound: as a HorizontalPodAutoscaler does after
a ``kubectl scale``, the job's policy keeps sizing it within its elastic range from then
on (``docs/concepts/elastic.md``), and the line printed says so, naming the range.
"""

from __future__ import annotations

from typing import Any

import typer

from phalanx.cli.remote import connect


def scale(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The job."),
    replicas: int = typer.Argument(..., help="Replicas of its elastic role, within its range."),
) -> None:
    """Resize a job's elastic role now: replicas are added (placed when there is room) or
    the highest are stopped; the job keeps running, and its policy may resize it later
    within the role's range (maxReplicas bounds it)."""
    with connect(ctx) as client:
        job = client.scale(name, replicas)
    typer.echo(f"job/{job.name} scale to {replicas} requested{_later(job.document)}")


def _later(document: dict[str, Any] | None) -> str:
    """``; its policy may resize it later within 1..3 (maxReplicas bounds it)``, from the
    job's elastic role (nothing when the document does not say)."""
    roles = (document or {}).get("spec", {}).get("roles", [])
    elastic = next((role["elastic"] for role in roles if role.get("elastic")), None)
    if not isinstance(elastic, dict) or "maxReplicas" not in elastic:
        return ""
    low = elastic.get("minReplicas", 1)
    return f"; its policy may resize it later within {low}..{elastic['maxReplicas']}"
