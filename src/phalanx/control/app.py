"""The FastAPI application: routers, error shapes, and the parts it reads from."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from phalanx import __version__
from phalanx.control.api import jobs, nodes, queues, system, users
from phalanx.control.api.deps import ApiError
from phalanx.control.auth import TokenCache
from phalanx.control.batcher import SubmissionWriter
from phalanx.control.controllers.controller import Controller
from phalanx.control.metrics import Metrics
from phalanx.control.store.database import Database
from phalanx.spec.diagnostics import format_path


def create_app(db: Database, controller: Controller, metrics: Metrics) -> FastAPI:
    """The API over ``db``, recording intent for ``controller``."""
    app = FastAPI(
        title="phalanx",
        version=__version__,
        description="A scheduler for AI jobs on shared GPU clusters.",
    )
    app.state.db = db
    app.state.controller = controller
    app.state.metrics = metrics
    app.state.tokens = TokenCache(db)
    app.state.submissions = SubmissionWriter(db)
    for module in (jobs, queues, nodes, users, system):
        app.include_router(module.router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    return app


async def _api_error(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return JSONResponse(error.detail, status_code=error.status_code, headers=error.headers)


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
