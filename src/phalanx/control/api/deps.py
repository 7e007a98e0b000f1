"""What every route needs: the server's parts, the caller, and errors in one shape."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, Final, TypeVar

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from phalanx.control.auth import Expired, Principal, TokenCache
from phalanx.control.controllers.controller import Controller
from phalanx.control.errors import ApiError
from phalanx.control.store import Session
from phalanx.control.store.database import Database
from phalanx.control.throttle import Throttle, address_key, retry_after
from phalanx.domain.errors import DocumentError
from phalanx.spec.dataset import DatasetDocument
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.loader import build_document
from phalanx.spec.secret import SecretDocument
from phalanx.spec.tuning import TuningDocument
from phalanx.wire.views import ErrorView

_bearer = HTTPBearer(auto_error=False, description="a phalanx token (phx_...)")

#: Sent by the console with each request it makes for a visitor: the visitor's address,
#: and the key that proves the console sent it (``visitor_headers``).
VISITOR_HEADER: Final = "X-Phalanx-Visitor"
VISITOR_KEY_HEADER: Final = "X-Phalanx-Visitor-Key"


#: What each error status a route documents means, in general (the body says exactly).
_MEANINGS: Final = {
    400: "The body is not JSON text in UTF-8.",
    401: "No bearer token, or one that is unknown, revoked or expired.",
    403: "The caller may not do this.",
    404: "No such object, or not one the caller may see.",
    409: "It conflicts with what is stored.",
    413: "The request body is over the API's 10 MiB limit.",
    422: "A parameter or the body is invalid.",
    429: "Too many unknown or invalid tokens came from the caller's address: it is locked "
    "out for the seconds in Retry-After, whatever token it sends.",
    501: "This server cannot do this.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of error answers a route gives: each an ``ErrorView``."""
    return {status: {"model": ErrorView, "description": _MEANINGS[status]} for status in statuses}


def session(request: Request) -> Iterator[Session]:
    """A session committed when the route returns normally."""
    db: Database = request.app.state.db
    with db.session() as db_session:
        yield db_session


# The small dependencies are coroutines: FastAPI runs a plain function dependency on a
# worker thread, and the hop costs more than these do.


async def controller(request: Request) -> Controller:
    """The server's controller (read its published views; wake it after recording intent)."""
    found: Controller = request.app.state.controller
    return found


def visitor_headers(key: str, address: str) -> dict[str, str]:
    """The headers by which the console says that its request carries a visitor's, from
    ``address``; ``key`` is the app's ``visitor_key``, known only inside this process."""
    return {VISITOR_KEY_HEADER: key, VISITOR_HEADER: address}


def client_address(request: Request) -> str:
    """The address the request's failed sign-ins count against: its peer's, or for a
    request the console makes for a visitor, the visitor's (only when the request
    carries the app's ``visitor_key``: nobody else can name an address)."""
    forwarded = request.headers.get(VISITOR_HEADER)
    if forwarded is not None:
        key: str = request.app.state.visitor_key
        given = request.headers.get(VISITOR_KEY_HEADER, "")
        if hmac.compare_digest(given.encode(), key.encode()):
            return forwarded
    return request.client.host if request.client is not None else ""


def check_throttle(request: Request) -> tuple[Throttle, tuple[str, ...]]:
    """The app's throttle and the keys a token sent with ``request`` is counted against;
    a 429 ``ApiError`` with ``Retry-After`` while any of them is locked out."""
    throttle: Throttle = request.app.state.throttle
    address = client_address(request)
    keys = (address_key(address),)
    wait = throttle.wait(keys)
    if wait > 0:
        seconds = retry_after(wait)
        longest = throttle.settings.max_lockout
        raise ApiError(
            429,
            f"too many unknown or invalid tokens from {address or 'this address'}: every "
            f"token from there is refused for {seconds} s more",
            field="Authorization",
            fix=f"wait {seconds} s (Retry-After), then send a valid token; each further "
            f"failure doubles the wait, up to {longest:g} s",
            headers={"Retry-After": str(seconds)},
        )
    return throttle, keys


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller, from ``Authorization: Bearer <token>``; 401 without a valid token (one
    that is unknown, revoked, or past its expiry, which the answer says). Such a token
    counts as a failure against the caller's address; while that address is locked out
    (``check_throttle``), every token from it is refused with 429 before it is looked at,
    valid ones included. A valid token clears its address's failures."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(
            401,
            "no bearer token",
            field="Authorization",
            fix="send 'Authorization: Bearer <token>' (export PHALANX_TOKEN for the CLI)",
        )
    throttle, keys = check_throttle(request)
    tokens: TokenCache = request.app.state.tokens
    token = credentials.credentials
    found = tokens.remembered(token) or await run_in_threadpool(tokens.check, token)
    if found is None or isinstance(found, Expired):
        throttle.failed(keys)
    else:
        throttle.succeeded(keys)
    if isinstance(found, Expired):
        when = datetime.fromtimestamp(found.at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        raise ApiError(
            401,
            f"this token of {found.user} expired at {when}",
            field="Authorization",
            fix=f"use a new token: 'phalanx token create {found.user}' with a token that is "
            "still valid, or ask an admin for one",
        )
    if found is None:
        raise ApiError(
            401, "unknown or revoked token", field="Authorization", fix="ask an admin for a token"
        )
    return found


async def admin(caller: Annotated[Principal, Depends(principal)]) -> Principal:
    """The caller, who must be an admin; 403 otherwise."""
    if not caller.is_admin:
        raise ApiError(403, f"user {caller.name} is not an admin", fix="ask an admin to do this")
    return caller


Caller = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]
# "function" scope: the transaction commits before the answer is sent, never after it.
DbSession = Annotated[Session, Depends(session, scope="function")]
TheController = Annotated[Controller, Depends(controller)]


_Kind = TypeVar("_Kind")


def document_of(body: Any, kind: type[_Kind], endpoint: str) -> _Kind:
    """``body`` as a validated document of ``kind``; a 422 ``ApiError`` naming the field
    and the fix for an invalid one, or for a document of another kind."""
    try:
        document = build_document(body)
    except DocumentError as error:
        raise ApiError(422, str(error), field=error.field, fix=error.fix) from None
    if not isinstance(document, kind):
        name = kind.__name__.removesuffix("Document")
        raise ApiError(
            422,
            f"a {document.kind} document was sent to the {endpoint} endpoint",
            field="kind",
            fix=f"send kind {name} here",
        )
    return document


def addressed_user(caller: Principal, user: str | None) -> str:
    """Whose thing (a secret, a dataset: kinds each user has their own of) ``caller``
    addresses with ``?user=``: their own, or for an admin ``user``'s. A user naming
    another user reaches nothing: ``""``, which no user is, so it answers the 404 of a
    thing not there."""
    if user is None or user == caller.name or caller.is_admin:
        return user or caller.name
    return ""


_Owned = TypeVar("_Owned", SecretDocument, DatasetDocument, InferenceDocument, TuningDocument)


def owned(document: _Owned, caller: Principal) -> _Owned:
    """``document`` (a kind each user has their own of) as ``caller``'s: its
    ``spec.user`` is the caller, unless an admin named another user there."""
    if caller.is_admin and "user" in document.spec.model_fields_set:
        return document
    spec = document.spec.model_copy(update={"user": caller.name})
    return document.model_copy(update={"spec": spec})
