"""``/ui/login`` and ``/ui/logout``: a session from a pasted API token, and its end.

The token is checked with the API (``whoami``) before the session starts; a wrong one
is refused at the field. Refused tokens count against the visitor's address (the API
limits them: see ``session.api_client``); while it is locked out, the form answers 429
saying how long to wait, whatever token is sent. ``next`` only ever leads to a page of
the console.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from phalanx.client import ClientError
from phalanx.web import csrf
from phalanx.web.console import console_of
from phalanx.web.session import (
    LOGIN_COOKIE,
    ROOT,
    SignedForm,
    api_client,
    end_session,
    set_session,
)

router = APIRouter()

#: Longest token accepted (phalanx's are 47 characters).
MAX_TOKEN: Final = 4096


def _next_page(wanted: str) -> str:
    """``wanted`` if it is a page of the console, else the console's front page."""
    if wanted.startswith(f"{ROOT}/") and not wanted.startswith("//") and "\\" not in wanted:
        return wanted
    return f"{ROOT}/"


def _form(
    request: Request, *, wanted: str, error: str = "", status: int = 200, nonce: str | None = None
) -> Response:
    nonce = nonce or request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)
    response = console_of(request).templates.TemplateResponse(
        request,
        "login.html",
        {
            "csrf": csrf.token_for(request, f"login:{nonce}"),
            "next": _next_page(wanted),
            "error": error,
            "user": None,
        },
        status_code=status,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        path=ROOT,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/login")
def login_page(request: Request, next: str = "", ended: str = "") -> Response:
    """The login form."""
    error = f"your session ended: {ended}; log in again" if ended else ""
    return _form(request, wanted=next, error=error)


async def _login_form(request: Request) -> dict[str, str]:
    form = await csrf.read_form(request)
    nonce = request.cookies.get(LOGIN_COOKIE)
    csrf.check(request, form, None if nonce is None else f"login:{nonce}")
    return form


@router.post("/login")
def login(request: Request, form: Annotated[dict[str, str], Depends(_login_form)]) -> Response:
    """Start a session if the API knows the token."""
    token = form.get("token", "").strip()
    wanted = form.get("next", "")
    if not token or len(token) > MAX_TOKEN or not token.isprintable():
        return _form(
            request, wanted=wanted, error="token: paste your API token (phx_...)", status=422
        )
    with api_client(request, token) as client:
        try:
            client.whoami()
        except ClientError as error:
            if error.status == 429:
                message = f"{error.detail}; wait that long, then log in again"
                return _form(request, wanted=wanted, error=message, status=429)
            return _form(
                request,
                wanted=wanted,
                error=f"token: {error.message()}",
                status=401 if error.status == 401 else 502,
            )
    response = RedirectResponse(_next_page(wanted), status_code=303)
    set_session(request, response, token)
    return response


@router.post("/logout")
def logout(_: SignedForm) -> Response:
    """End the session."""
    response = RedirectResponse(f"{ROOT}/login", status_code=303)
    end_session(response)
    return response
