"""The FastAPI application: routers, error shapes, and the parts it reads from."""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from phalanx import __version__
from phalanx.control.api import (
    cache,
    inferences,
    jobs,
    models,
    nodes,
    pipelines,
    queues,
    reports,
    rollouts,
    runs,
    system,
    tokens,
    users,
)
from phalanx.control.api import datasets as dataset_routes
from phalanx.control.api import gpus as gpu_routes
from phalanx.control.api import priority as priority_routes
from phalanx.control.api import secrets as secret_routes
from phalanx.control.api import tunings as tuning_routes
from phalanx.control.api import usage as usage_routes
from phalanx.control.api.deps import errors, visitor_headers
from phalanx.control.auth import TokenCache
from phalanx.control.batcher import SubmissionWriter
from phalanx.control.body_limit import BodyLimit
from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.datasets import DatasetLister
from phalanx.control.controllers.model_fetch import ModelFetcher
from phalanx.control.controllers.models import ModelRegistrar
from phalanx.control.controllers.serving import Serving
from phalanx.control.controllers.tuning import Tuner
from phalanx.control.controllers.warming import DatasetWarmer
from phalanx.control.controllers.workflow import Workflows
from phalanx.control.errors import ApiError
from phalanx.control.metrics import Metrics
from phalanx.control.secretbox import SecretBox
from phalanx.control.store import DataError
from phalanx.control.store.database import Database
from phalanx.control.tenancy import IdentityMode, Tenancy
from phalanx.control.throttle import Throttle
from phalanx.domain.job import Job
from phalanx.domain.prices import PriceSheet
from phalanx.gateway.proxy import Gateway
from phalanx.spec.diagnostics import format_path
from phalanx.web import create_console

#: Where the gateway is mounted: a service NAME is reached at /serve/NAME/.
GATEWAY_PREFIX = "/serve"


def create_app(
    db: Database,
    controller: Controller,
    metrics: Metrics,
    tenancy: Tenancy | None = None,
    *,
    metrics_token: str | None = None,
    workflows: Workflows | None = None,
    registrar: ModelRegistrar | None = None,
    fetcher: ModelFetcher | None = None,
    on_stored: Callable[[Sequence[tuple[int, Job]]], None] | None = None,
    serving: Serving | None = None,
    gateway: Gateway | None = None,
    console_api: Callable[[], str] | None = None,
    reports_dir: Path | None = None,
    throttle: Throttle | None = None,
    secret_box: SecretBox | None = None,
    lister: DatasetLister | None = None,
    warmer: DatasetWarmer | None = None,
    tuner: Tuner | None = None,
    price_sheet: PriceSheet | None = None,
) -> FastAPI:
    """The API over ``db``, recording intent for ``controller``; users get what
    ``tenancy`` gives them (default: every task as the server, as with a shared identity).
    Request bodies over ``body_limit.MAX_BODY`` (10 MiB) are refused with 413 before they
    are read. ``/metrics`` answers ``metrics_token`` (when given) and admins' tokens. With
    ``console_api`` (the API's own base URL, as the server's loopback reaches it) the web
    console is served at ``/ui``, reading everything through that URL as each visitor,
    and ``/`` redirects there (without it ``/`` is an unknown path, as any other).
    With ``reports_dir`` the simulator's reports in it are listed and served at
    ``/api/v1/reports`` (without it those routes answer 404, saying so). Unknown and
    invalid tokens are counted per client address by ``throttle`` (default: a
    ``Throttle`` with its default settings); a locked-out address gets 429 with
    ``Retry-After`` (``api.deps.principal``). The console's requests for its visitors
    count against the visitors' addresses, never against the loopback's. Jobs stored
    by the API go to ``on_stored`` (default: ``controller.offer``); ``serving`` is poked
    when services change, and ``gateway`` (an ASGI app) is mounted at ``/serve``.
    Secrets are sealed with ``secret_box`` (without it, creating one answers 501). A
    dataset written has ``lister`` list it soon; ``warmer`` warms datasets on request
    and says which nodes hold them (without it, a warm answers 501); ``tuner`` runs
    the tunings' trials. Usage reports are priced by ``price_sheet`` (default: the
    built-in prices)."""
    app = FastAPI(
        lifespan=None if gateway is None else _closing(gateway),
        title="phalanx",
        version=__version__,
        description="A scheduler for AI jobs on shared GPU clusters.",
        # Any request: a body over the limit (``BodyLimit``); a token from a locked-out address.
        responses=errors(413, 429),
    )
    app.state.db = db
    app.state.controller = controller
    app.state.workflows = workflows  # None: runs are recorded, and no one advances them
    # None: versions are listed and deleted, and no one registers or collects them
    app.state.model_store = None if registrar is None else registrar.store
    app.state.models_deleted = lambda: _models_deleted(registrar, fetcher)
    app.state.metrics = metrics
    app.state.metrics_digest = (
        None if metrics_token is None else hashlib.sha256(metrics_token.encode()).digest()
    )
    app.state.tenancy = tenancy or Tenancy(IdentityMode.SHARED, db)
    app.state.tokens = TokenCache(db)
    app.state.throttle = throttle or Throttle()
    # Proves that a request naming a visitor's address comes from this app's console.
    app.state.visitor_key = secrets.token_urlsafe(32)
    app.state.reports = reports_dir
    app.state.submissions = SubmissionWriter(db, on_stored=on_stored or controller.offer)
    app.state.serving = serving  # None: services are recorded, and no one serves them
    app.state.secret_box = secret_box
    app.state.datasets_changed = None if lister is None else lister.poke
    app.state.dataset_warmer = warmer
    app.state.tuner = tuner  # None: tunings are recorded, and no one runs their trials
    app.state.price_sheet = price_sheet or PriceSheet()  # what usage reports charge
    # Set when the server begins to stop: open streams (followed logs) end at once, so
    # that the shutdown never waits on a job that may run for hours.
    app.state.stopping = threading.Event()
    for module in (
        jobs,
        queues,
        nodes,
        gpu_routes,
        users,
        tokens,
        system,
        pipelines,
        runs,
        cache,
        models,
        inferences,
        rollouts,
        secret_routes,
        dataset_routes,
        tuning_routes,
        usage_routes,
        priority_routes,
        reports,
    ):
        app.include_router(module.router, dependencies=[Depends(_no_nul_bytes)])
    if gateway is not None:
        app.mount(GATEWAY_PREFIX, gateway)
    app.state.console = None if console_api is None else create_console(console_api)
    if app.state.console is not None:
        app.state.console.state.visitor_headers = partial(visitor_headers, app.state.visitor_key)
        app.mount("/ui", app.state.console)
        app.add_api_route("/", _to_console, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_middleware(BodyLimit)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(DataError, _unstorable)
    return app


async def _to_console() -> RedirectResponse:
    """``/``: the console (a browser pointed at the server's address lands on it)."""
    return RedirectResponse("/ui", status_code=307)


async def _api_error(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return JSONResponse(error.detail, status_code=error.status_code, headers=error.headers)


async def _http_error(request: Request, error: Exception) -> Response:
    """Starlette's and FastAPI's own refusals (a body that is not JSON text, an unknown
    path or method) in the API's error shape, with a fix."""
    assert isinstance(error, StarletteHTTPException)
    fixes = {
        400: ("body", "send the body as JSON text in UTF-8 (Content-Type: application/json)"),
        404: (None, f"check the path {request.url.path!r}: see /docs for the API's routes"),
        405: (None, f"see /docs for the methods {request.url.path!r} takes"),
    }
    if error.status_code not in fixes:
        return await http_exception_handler(request, error)
    field, fix = fixes[error.status_code]
    body: dict[str, Any] = {"detail": str(error.detail), "fix": fix}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


async def _invalid_request(_: Request, error: Exception) -> JSONResponse:
    """FastAPI's own validation (query parameters, body shape) in the API's error shape."""
    assert isinstance(error, RequestValidationError)
    problems: list[dict[str, Any]] = []
    for item in error.errors()[:10]:
        where = format_path([str(p) for p in item.get("loc", ())])
        problems.append({"field": where, "detail": item.get("msg", "invalid")})
    first = problems[0] if problems else {"field": "", "detail": "invalid request"}
    message = "; ".join(f"{p['field']}: {p['detail']}" for p in problems)
    return JSONResponse(
        {
            "detail": message,
            "field": first["field"],
            "fix": "correct the field as described (see /docs for the schema)",
            "problems": problems,
        },
        status_code=422,
    )


async def _no_nul_bytes(request: Request) -> None:
    """No path or query parameter holds a NUL byte: no name has one, and PostgreSQL
    cannot even compare text with one (SQLite would just find nothing)."""
    for params in (request.path_params, request.query_params):
        for name, value in params.items():
            if "\x00" in str(value):
                raise ApiError(
                    422, f"{name} contains a NUL byte", field=name, fix="remove the NUL character"
                )


async def _unstorable(_: Request, error: Exception) -> JSONResponse:
    """Any other value the database refuses (a number out of range) is the request's
    fault: a 422, never a 500."""
    cause = str(getattr(error, "orig", error)).splitlines()[0][:200]
    return JSONResponse(
        {
            "detail": f"a value of the request cannot be stored or compared: {cause}",
            "fix": "check the values sent (text without NUL bytes, numbers in range)",
        },
        status_code=422,
    )


def _models_deleted(registrar: ModelRegistrar | None, fetcher: ModelFetcher | None) -> None:
    """Versions were deleted: their files leave the store and the cache soon."""
    if registrar is not None:
        registrar.collect_soon()
    if fetcher is not None:
        fetcher.poke()


def _closing(gateway: Gateway) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: at shutdown, the gateway's pooled connections are closed on
    the loop that made them."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await gateway.aclose()

    return lifespan
