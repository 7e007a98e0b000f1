"""The console as an ASGI application, to be mounted at ``/ui`` by the server.

One router per view (``views/``); at most ``gate.CONSOLE_CONCURRENCY`` requests are
served at once (the rest wait, holding no thread: the API's handlers keep theirs);
refusals become pages, never tracebacks: no session
-> the login page (a refresh request gets 401, and its script reloads the page); an
API refusal -> a page with the API's message (404 for another user's job or service, as
the API says); a form without its CSRF token -> 403 with what to do. Every page carries the
security headers of ``headers`` (no framing, no foreign script).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from phalanx.client import ClientError
from phalanx.web.console import HERE, Console, console_of
from phalanx.web.csrf import CsrfRefused
from phalanx.web.gate import Gate
from phalanx.web.headers import SecurityHeaders
from phalanx.web.session import ROOT, LoginRequired, Refused, end_session
from phalanx.web.views import (
    admin,
    gpus,
    inference,
    inferences,
    job,
    jobs,
    login,
    reports,
    run,
    runs,
    submit,
    tuning,
    usage,
)

#: Sent by the page's script with each refresh: answered with a status, not a page.
REFRESH_HEADER: Final = "X-Phalanx-Refresh"


def create_console(api_url: Callable[[], str]) -> FastAPI:
    """The console, reading everything from the API at ``api_url()`` as each visitor."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.console = Console(api_url=api_url)
    for module in (
        login,
        jobs,
        job,
        submit,
        admin,
        runs,
        run,
        inferences,
        inference,
        tuning,
        reports,
        usage,
        gpus,
    ):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_exception_handler(LoginRequired, _login_required)
    app.add_exception_handler(Refused, _refused)
    app.add_exception_handler(CsrfRefused, _csrf_refused)
    app.add_exception_handler(ClientError, _client_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(Gate)
    app.add_middleware(SecurityHeaders)
    return app


def close_console(app: FastAPI) -> None:
    """Close the console's connections to the API (when the server stops)."""
    console: Console = app.state.console
    console.transport.shutdown()


def _error_page(request: Request, status: int, title: str, message: str, fix: str) -> Response:
    return console_of(request).templates.TemplateResponse(
        request,
        "error.html",
        {"title": title, "message": message, "fix": fix, "user": None},
        status_code=status,
    )


async def _login_required(request: Request, error: Exception) -> Response:
    assert isinstance(error, LoginRequired)
    response: Response
    if request.headers.get(REFRESH_HEADER) or request.method != "GET":
        response = Response("log in again", status_code=401, media_type="text/plain")
    else:
        query = {"next": error.path, **({"ended": error.ended} if error.ended else {})}
        response = RedirectResponse(f"{ROOT}/login?{urlencode(query)}", status_code=303)
    if error.ended:
        end_session(response)
    return response


async def _refused(request: Request, error: Exception) -> Response:
    assert isinstance(error, Refused)
    title = "Not allowed" if error.status == 403 else "Not found"
    return _error_page(request, error.status, title, error.message, "")


async def _csrf_refused(request: Request, error: Exception) -> Response:
    assert isinstance(error, CsrfRefused)
    return _error_page(
        request,
        403,
        "Form refused",
        f"refused: {error.reason}",
        "go back, reload the page (a form from before a restart of the server or another "
        "login is stale), and send it again",
    )


async def _client_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ClientError)
    status = error.status if error.status in (403, 404, 409, 422) else 502
    titles = {403: "Not allowed", 404: "Not found", 409: "Conflict", 422: "Invalid"}
    return _error_page(
        request, status, titles.get(status, "The API failed"), error.detail, error.fix or ""
    )


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 404:
        return _error_page(
            request, 404, "Not found", f"no page {request.url.path}", f"start at {ROOT}/jobs"
        )
    return _error_page(request, error.status_code, "Refused", str(error.detail), "")
