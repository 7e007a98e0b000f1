"""``/api/v1/users``: users. Admins manage users; anyone sees themselves. (Their tokens:
``phalanx.control.api.tokens``.)

A new user gets what the server's tenancy gives (``phalanx.control.tenancy``): with
per-user identities a uid of their own, or the existing account named in ``account``;
in single-user mode no second user at all (409, saying why and what to do).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from phalanx.control.api.deps import Admin, Caller, DbSession, errors
from phalanx.control.api.tokens import token_view
from phalanx.control.auth import TokenCache, issue_token
from phalanx.control.errors import ApiError
from phalanx.control.store import IntegrityError
from phalanx.control.store import users as stored_users
from phalanx.control.store.models import UserRow
from phalanx.control.tenancy import IdentityRefused, Tenancy
from phalanx.wire.bodies import NewUser
from phalanx.wire.views import TokenView, UserView

router = APIRouter(prefix="/api/v1/users", tags=["users"], responses=errors(401, 422))


@router.get("/me", response_model=UserView)
def whoami(caller: Caller) -> UserView:
    """The caller."""
    return UserView(name=caller.name, role=caller.role.value)


@router.get("", response_model=list[UserView], responses=errors(403))
def list_users(_: Admin, session: DbSession) -> list[UserView]:
    """Every user, by name, with the uid their tasks run as."""
    return [
        UserView(name=u.name, role=u.role, uid=u.uid, account=u.account)
        for u in stored_users.users(session)
    ]


@router.post("", status_code=201, response_model=TokenView, responses=errors(400, 403, 409))
def create_user(body: NewUser, _: Admin, session: DbSession, request: Request) -> TokenView:
    """Create a user with the identity their tasks run as; the answer holds their first
    token (shown only now)."""
    user = UserRow(name=body.name, role=body.role, created_at=time.time())
    session.add(user)
    try:
        session.flush()
    except IntegrityError:
        raise ApiError(
            409, f"user {body.name!r} exists", field="name", fix="choose another name"
        ) from None
    tenancy: Tenancy = request.app.state.tenancy
    try:
        tenancy.admit(session, user, body.account)
    except IdentityRefused as refused:
        raise ApiError(
            refused.status, refused.detail, field=refused.field, fix=refused.fix
        ) from None
    issued = issue_token(session, user, "created")
    view = token_view(issued.row, issued.secret)
    return view.model_copy(update={"uid": user.uid, "account": user.account})


@router.delete("/{name}", status_code=204, responses=errors(403, 404, 409))
def delete_user(name: str, caller: Admin, session: DbSession, request: Request) -> None:
    """Delete a user and revoke their tokens (their jobs stay)."""
    if name == caller.name:
        raise ApiError(409, "an admin cannot delete themselves", fix="ask another admin")
    user = stored_users.user(session, name)
    if user is None:
        raise ApiError(404, f"no user named {name!r}", field="name", fix="list users")
    session.delete(user)
    session.commit()
    tokens: TokenCache = request.app.state.tokens
    tokens.forget()
    tenancy: Tenancy = request.app.state.tenancy
    tenancy.identities.forget(name)  # their queued tasks must not start as them any more
