"""``/healthz`` (open to all); ``/metrics`` and ``/api/v1/system/history`` (for an admin's
token or the metrics token: the history is the same cluster-wide figures as ``/metrics``,
kept for the console's charts)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from phalanx.control.api.deps import DbSession, check_throttle, errors, principal
from phalanx.control.errors import ApiError
from phalanx.control.metrics import METRICS_TOKEN_FILE, Metrics
from phalanx.control.store.database import ping
from phalanx.wire.views import HistoryBucketView, HistoryView

router = APIRouter(tags=["system"], responses=errors(422))

_bearer = HTTPBearer(
    auto_error=False, description=f"the metrics token (DATA_DIR/{METRICS_TOKEN_FILE}) or an admin's"
)
_SCRAPE_FIX = (
    f"send 'Authorization: Bearer' with the token in DATA_DIR/{METRICS_TOKEN_FILE} (Prometheus: "
    "authorization.credentials_file in the scrape config) or an admin's token"
)


@router.get("/healthz")
def healthz(session: DbSession, request: Request) -> dict[str, str]:
    """``{"status": "ok"}`` while the database answers and the controller ticks."""
    ping(session)
    return {"status": "ok", "version": request.app.version}


async def scraper(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Lets through the metrics token and admins' tokens; 401 without a valid token, 403
    for a user who is not an admin. A wrong token counts against the caller's address as
    any other (``principal``), and while that address is locked out every token from it
    is refused with 429, the metrics token included."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(401, "no bearer token", field="Authorization", fix=_SCRAPE_FIX)
    check_throttle(request)
    token = credentials.credentials
    expected: bytes | None = request.app.state.metrics_digest
    if expected is not None and hmac.compare_digest(
        hashlib.sha256(token.encode()).digest(), expected
    ):
        return
    try:
        caller = await principal(request, credentials)
    except ApiError as refused:
        if refused.status_code == 429:
            raise  # its own fix (wait) and its Retry-After
        detail = refused.detail["detail"] if isinstance(refused.detail, dict) else "refused"
        raise ApiError(
            refused.status_code, str(detail), field="Authorization", fix=_SCRAPE_FIX
        ) from None
    if not caller.is_admin:
        raise ApiError(403, f"user {caller.name} may not read the metrics", fix=_SCRAPE_FIX)


@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[Depends(scraper)],
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}},
        **errors(401, 403),
    },
)
def metrics(request: Request) -> Response:
    """Prometheus text exposition; needs the metrics token or an admin's token."""
    registry: Metrics = request.app.state.metrics
    return Response(generate_latest(registry.registry), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/api/v1/system/history",
    response_model=HistoryView,
    dependencies=[Depends(scraper)],
    responses=errors(401, 403),
)
def history(
    request: Request,
    since: Annotated[
        float | None,
        Query(description="only buckets starting at or after this time (seconds since the epoch)"),
    ] = None,
) -> HistoryView:
    """The server's own metrics over the last hours in time buckets: scheduling session
    latency, jobs started, tasks evicted, pending jobs, GPU allocation ratio. Needs the
    metrics token or an admin's token, as ``/metrics`` does."""
    kept = request.app.state.metrics.history
    return HistoryView(
        bucket_seconds=kept.width,
        retention_seconds=kept.width * kept.capacity,
        buckets=[
            HistoryBucketView.model_validate(b, from_attributes=True)
            for b in kept.buckets(since=since)
        ],
    )
