"""``/healthz`` and ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from phalanx.control.api.deps import DbSession, errors
from phalanx.control.metrics import Metrics

router = APIRouter(tags=["system"], responses=errors(422))


@router.get("/healthz")
def healthz(session: DbSession, request: Request) -> dict[str, str]:
    """``{"status": "ok"}`` while the database answers and the controller ticks."""
    session.execute(text("SELECT 1"))
    return {"status": "ok", "version": request.app.version}


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    registry: Metrics = request.app.state.metrics
    return Response(generate_latest(registry.registry), media_type=CONTENT_TYPE_LATEST)
