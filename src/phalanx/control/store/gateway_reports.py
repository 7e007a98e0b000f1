"""Gateway reports in the store: every query of ``GatewayReportRow``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import GatewayReportRow


def replace(session: Session, gateway: str, rows: Iterable[dict[str, Any]], *, now: float) -> None:
    """Make ``rows`` (each a predictor's columns but ``gateway`` and ``updated_at``) what
    ``gateway`` reports now, in place of what it reported before."""
    session.execute(delete(GatewayReportRow).where(GatewayReportRow.gateway == gateway))
    session.add_all(GatewayReportRow(gateway=gateway, updated_at=now, **row) for row in rows)


def fresh(session: Session, since: float) -> Sequence[GatewayReportRow]:
    """The reports rewritten at ``since`` or later (older ones are from gateways gone)."""
    query = select(GatewayReportRow).where(GatewayReportRow.updated_at >= since)
    return session.scalars(query).all()


def forget(session: Session, gateway: str | None = None, *, before: float | None = None) -> None:
    """Remove ``gateway``'s reports (it stopped), or every report older than ``before``."""
    query = delete(GatewayReportRow)
    if gateway is not None:
        query = query.where(GatewayReportRow.gateway == gateway)
    if before is not None:
        query = query.where(GatewayReportRow.updated_at < before)
    session.execute(query)
