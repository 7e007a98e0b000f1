"""A user's bearer tokens: list, create (optionally expiring) and revoke one.

Users manage their own tokens, admins anyone's. A token's secret is in the answer that
creates it and nowhere else: listings carry its id, label and times. Revoking a token
(the one in use included) refuses it from the next request on. No revocation may leave
the server without an admin able to sign in.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Request

from phalanx.control.api.deps import Caller, DbSession, errors
from phalanx.control.auth import Principal, TokenCache, UserRole, issue_token
from phalanx.control.errors import ApiError
from phalanx.control.store import users as stored_users
from phalanx.control.store.models import TokenRow, UserRow
from phalanx.wire.bodies import TokenRequest
from phalanx.wire.views import TokenInfoView, TokenView

TokenId = Annotated[
    int, Path(ge=1, le=2**31 - 1, description="the token's id (phalanx token list)")
]

router = APIRouter(prefix="/api/v1", tags=["tokens"], responses=errors(401, 422))


@router.get("/users/{name}/tokens", response_model=list[TokenInfoView], responses=errors(403, 404))
def list_tokens(name: str, caller: Caller, session: DbSession) -> list[TokenInfoView]:
    """``name``'s tokens, oldest first, without their secrets (users: their own)."""
    user = _owner(session, name, caller, "list the tokens of")
    rows = stored_users.tokens(session, user.id)
    now = time.time()
    return [_info(row, caller, now) for row in rows]


@router.post(
    "/users/{name}/tokens",
    status_code=201,
    response_model=TokenView,
    responses=errors(400, 403, 404),
)
def create_token(name: str, body: TokenRequest, caller: Caller, session: DbSession) -> TokenView:
    """A new token for ``name`` (admins for anyone, users for themselves), valid for
    ``expires`` when given; its secret is in this answer only."""
    user = _owner(session, name, caller, "make tokens for")
    expires_at = None if body.expires is None else time.time() + body.expires
    issued = issue_token(session, user, body.label[:63], expires_at=expires_at)
    return token_view(issued.row, issued.secret)


@router.delete("/tokens/{token_id}", status_code=204, responses=errors(404, 409))
def revoke_token(token_id: TokenId, caller: Caller, session: DbSession, request: Request) -> None:
    """Revoke one token (users: their own; admins: anyone's), the one in use included:
    it is refused from the next request on. Refused with 409 when no admin would be
    left with a valid token."""
    row = session.get(TokenRow, token_id)
    if row is None or (not caller.is_admin and row.user.name != caller.name):
        raise ApiError(
            404,
            f"no token with id {token_id}",
            field="token_id",
            fix="list your tokens: phalanx token list",
        )
    admin = UserRole.ADMIN.value
    if row.user.role == admin and not stored_users.another_token_of_role(
        session, admin, row.id, time.time()
    ):
        raise ApiError(
            409,
            f"token {token_id} is the last valid token of any admin; without it nobody "
            "could manage this server",
            field="token_id",
            fix=f"make another admin token first (phalanx token create {row.user.name}), "
            "then revoke this one",
        )
    session.delete(row)
    session.commit()
    tokens: TokenCache = request.app.state.tokens
    tokens.forget()


def token_view(row: TokenRow, secret: str) -> TokenView:
    """The answer that carries a new token's secret (the only one that does)."""
    return TokenView(
        user=row.user.name,
        token=secret,
        id=row.id,
        label=row.label,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


def _owner(session: DbSession, name: str, caller: Principal, verb: str) -> UserRow:
    # Refused before the lookup: a user learns nothing of who else exists.
    if not caller.is_admin and caller.name != name:
        raise ApiError(
            403,
            f"user {caller.name} may not {verb} {name}",
            field="name",
            fix="name yourself, or ask an admin",
        )
    user = stored_users.user(session, name)
    if user is None:
        raise ApiError(404, f"no user named {name!r}", field="name", fix="create the user first")
    return user


def _info(row: TokenRow, caller: Principal, now: float) -> TokenInfoView:
    return TokenInfoView(
        id=row.id,
        user=row.user.name,
        label=row.label,
        created_at=row.created_at,
        expires_at=row.expires_at,
        expired=row.expires_at is not None and row.expires_at <= now,
        current=row.id == caller.token_id,
    )
