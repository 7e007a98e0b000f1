"""Who is looking: the session cookie, and the visitor a page is rendered for.

The cookie holds the visitor's API token (HttpOnly, SameSite=Strict, Path=/ui, Secure
over https); it is never put in a URL or a page. Each request checks it with the API
(``whoami``): a revoked or expired token ends the session at once, and the visitor is
sent to the login page. Every request the console makes for a visitor names the
visitor's address to the API (``api_client``), so that a refused token counts against
that address and not the console's own: while it is locked out, each page is refused
with 429 (the session is kept). A page for signed-in visitors takes ``Visitor`` (or
``AdminVisitor``); a form that changes something takes ``SignedForm``, whose CSRF token
is checked before anything is asked of the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Final

import httpx
from fastapi import Depends, HTTPException, Request, Response

from phalanx.client import Client, ClientError, UserView
from phalanx.domain.errors import RequestRefused
from phalanx.web import csrf
from phalanx.web.console import API_TIMEOUT, console_of

COOKIE: Final = "phalanx_session"
#: The login form's nonce, before there is a session (see ``csrf``).
LOGIN_COOKIE: Final = "phalanx_login"
#: Where the console is mounted: the cookies' path.
ROOT: Final = "/ui"


class LoginRequired(RequestRefused):
    """No session, or one whose token the API no longer accepts."""

    def __init__(self, path: str, *, ended: str = "") -> None:
        super().__init__(path)
        self.path = path
        self.ended = ended  # why a session ended ("": there was none)


class Refused(RequestRefused):
    """The visitor may not see this page (``status`` 403 or 404), with what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class Visitor:
    """A signed-in visitor: the API as them, who they are, and their forms' CSRF token."""

    client: Client
    user: UserView
    csrf: str

    @property
    def is_admin(self) -> bool:
        """True for admins."""
        return self.user.role == "admin"


class _OnBehalf(httpx.BaseTransport):
    """The console's shared transport, adding the headers that name one visitor."""

    def __init__(self, inner: httpx.BaseTransport, headers: Mapping[str, str]) -> None:
        self._inner = inner
        self._headers = headers

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.headers.update(self._headers)
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Nothing: the shared pool outlives each client."""


def api_client(request: Request, token: str) -> Client:
    """A client of the API acting as the holder of ``token`` for the visitor who sent
    ``request``: the API counts a token it refuses against the visitor's address (the
    server gives the console ``visitor_headers`` for that; without them, as the console
    itself)."""
    console = console_of(request)
    headers_for: Callable[[str], Mapping[str, str]] | None = getattr(
        request.app.state, "visitor_headers", None
    )
    if headers_for is None or request.client is None:
        return console.client(token)
    transport = _OnBehalf(console.transport, headers_for(request.client.host))
    return Client(console.api_url(), token, transport=transport, timeout=API_TIMEOUT)


def set_session(request: Request, response: Response, token: str) -> None:
    """Start a session holding ``token``; the login nonce goes."""
    response.set_cookie(
        COOKIE,
        token,
        path=ROOT,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.delete_cookie(LOGIN_COOKIE, path=ROOT, httponly=True, samesite="strict")


def end_session(response: Response) -> None:
    """Forget the session's cookie."""
    response.delete_cookie(COOKIE, path=ROOT, httponly=True, samesite="strict")


def visitor(request: Request) -> Iterator[Visitor]:
    """The signed-in visitor (a plain function: FastAPI runs it on a worker thread, as
    it calls the API); ``LoginRequired`` without a session the API accepts; a 429 page
    while the visitor's address is locked out for refused tokens."""
    token = request.cookies.get(COOKIE)
    query = request.url.query
    here = f"{request.url.path}?{query}" if query else request.url.path
    if not token:
        raise LoginRequired(here)
    client = api_client(request, token)
    try:
        try:
            user = client.whoami()
        except ClientError as error:
            if error.status == 401:
                raise LoginRequired(here, ended=error.detail) from None
            if error.status == 429:
                raise HTTPException(429, f"{error.detail}; wait, then reload") from None
            raise
        yield Visitor(client=client, user=user, csrf=csrf.token_for(request, token))
    finally:
        client.close()


def admin(found: Annotated[Visitor, Depends(visitor)]) -> Visitor:
    """The signed-in visitor, who must be an admin (403 page otherwise)."""
    if not found.is_admin:
        raise Refused(403, f"user {found.user.name} is not an admin: this page is for admins")
    return found


async def signed_form(request: Request) -> dict[str, str]:
    """The fields of a form sent by the signed-in visitor, its CSRF token checked first."""
    form = await csrf.read_form(request)
    csrf.check(request, form, request.cookies.get(COOKIE))
    return form


Signed = Annotated[Visitor, Depends(visitor)]
AdminVisitor = Annotated[Visitor, Depends(admin)]
SignedForm = Annotated[dict[str, str], Depends(signed_form)]
