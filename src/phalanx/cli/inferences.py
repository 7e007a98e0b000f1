"""Inference services for people: the tables of ``get inferences`` and ``describe
inference``."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from phalanx.cli.render import age
from phalanx.client import InferenceView


def inferences_table(services: Sequence[InferenceView], now: float) -> Table:
    """One row per service: name, Ready or not, each predictor's version, traffic and
    Ready/wanted replicas, its owner and age."""
    table = Table(box=None, pad_edge=False)
    for title in ("NAME", "READY", "PREDICTORS", "URL", "USER", "AGE"):
        table.add_column(title, overflow="fold")
    for service in services:
        predictors = ", ".join(
            f"{p.name} {p.model_version.partition('@')[0]} {p.traffic}% {p.ready}/{len(p.replicas)}"
            for p in service.predictors
        )
        table.add_row(
            service.name,
            "True" if service.ready else "False",
            predictors,
            service.url,
            service.user,
            age(service.created_at, now),
        )
    return table


def replicas_table(service: InferenceView) -> Table:
    """One row per replica: its predictor, job, phase, readiness and endpoint."""
    table = Table(box=None, pad_edge=False)
    for title in ("PREDICTOR", "REPLICA", "PHASE", "READY", "ENDPOINT"):
        table.add_column(title, overflow="fold")
    for predictor in service.predictors:
        for replica in predictor.replicas:
            table.add_row(
                predictor.name,
                replica.job,
                replica.phase,
                "True" if replica.ready else "False",
                replica.endpoint or "",
            )
    return table
