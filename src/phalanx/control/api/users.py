"""``/api/v1/users``: users. Admins manage users; anyone sees themselves. (Their tokens:
``phalanx.control.api.tokens``.)

A new user gets what the server's tenancy gives (``phalanx.control.tenancy``): with
per-user identities a uid of their own, or the existing account named in ``account``;
in single-user mode no second user at all (409, saying why and what to do).

A user's default queue (``default_queue``) is where their jobs that name no queue go, as
Slurm's DefaultAccount or a Kueue namespace's default LocalQueue; an admin sets it, and
only to an existing leaf queue the user may submit to (422 otherwise, naming the field).
"""

from __future__ import annotations

import time
from typing import assert_never

from fastapi import APIRouter, Request

from phalanx.control.api.deps import Admin, Caller, DbSession, errors
from phalanx.control.api.tokens import token_view
from phalanx.control.auth import TokenCache, issue_token
from phalanx.control.errors import ApiError
from phalanx.control.store import IntegrityError
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import datasets as stored_datasets
from phalanx.control.store import secrets as stored_secrets
from phalanx.control.store import users as stored_users
from phalanx.control.store.models import UserRow
from phalanx.control.submit import why_closed
from phalanx.control.tenancy import IdentityRefused, Tenancy
from phalanx.wire.bodies import NewUser, UserUpdate
from phalanx.wire.views import TokenView, UserView

router = APIRouter(prefix="/api/v1/users", tags=["users"], responses=errors(401, 422))


@router.get("/me", response_model=UserView)
def whoami(caller: Caller, session: DbSession) -> UserView:
    """The caller, and their default queue: where their jobs that name no queue go
    (none: the queue named ``default``)."""
    user = stored_users.user(session, caller.name)
    default_queue = None if user is None else user.default_queue
    return UserView(name=caller.name, role=caller.role.value, default_queue=default_queue)


@router.get("", response_model=list[UserView], responses=errors(403))
def list_users(_: Admin, session: DbSession) -> list[UserView]:
    """Every user, by name, with the uid their tasks run as and their default queue."""
    return [user_view(u) for u in stored_users.users(session)]


@router.patch("/{name}", response_model=UserView, responses=errors(400, 403, 404))
def update_user(name: str, body: UserUpdate, _: Admin, session: DbSession) -> UserView:
    """Change a user: a field given is set (``default_queue: null`` clears it), one left
    out stays. Their jobs already submitted stay where they are."""
    user = stored_users.user(session, name)
    if user is None:
        raise ApiError(404, f"no user named {name!r}", field="name", fix="list users")
    if "default_queue" in body.model_fields_set:
        if body.default_queue is not None:
            check_default_queue(session, body.default_queue, user.name, user.role)
        user.default_queue = body.default_queue
    view = user_view(user)
    session.commit()  # the answer means it is stored: the user's next job goes there
    return view


@router.post("", status_code=201, response_model=TokenView, responses=errors(400, 403, 409))
def create_user(body: NewUser, _: Admin, session: DbSession, request: Request) -> TokenView:
    """Create a user with the identity their tasks run as; the answer holds their first
    token (shown only now)."""
    if body.default_queue is not None:
        check_default_queue(session, body.default_queue, body.name, body.role)
    user = UserRow(
        name=body.name, role=body.role, created_at=time.time(), default_queue=body.default_queue
    )
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
    view = token_view(issued.row, issued.secret).model_copy(
        update={"uid": user.uid, "account": user.account, "default_queue": user.default_queue}
    )
    session.commit()  # the answer means the user is stored: their token works at once
    return view


@router.delete("/{name}", status_code=204, responses=errors(403, 404, 409))
def delete_user(name: str, caller: Admin, session: DbSession, request: Request) -> None:
    """Delete a user, revoke their tokens and remove their secrets and datasets (their jobs
    stay; a new user of the same name never gets the secrets)."""
    if name == caller.name:
        raise ApiError(409, "an admin cannot delete themselves", fix="ask another admin")
    user = stored_users.user(session, name)
    if user is None:
        raise ApiError(404, f"no user named {name!r}", field="name", fix="list users")
    session.delete(user)
    stored_secrets.remove_owned(session, name)
    stored_datasets.remove_owned(session, name)
    session.commit()
    tokens: TokenCache = request.app.state.tokens
    tokens.forget()
    tenancy: Tenancy = request.app.state.tenancy
    tenancy.identities.forget(name)  # their queued tasks must not start as them any more


def user_view(user: UserRow) -> UserView:
    """What the API shows of a user (an admin's view)."""
    return UserView(
        name=user.name,
        role=user.role,
        uid=user.uid,
        account=user.account,
        default_queue=user.default_queue,
    )


def check_default_queue(session: DbSession, queue: str, user: str, role: str) -> None:
    """Refuse (422, field ``default_queue``) a default queue for ``user`` (of ``role``)
    that would refuse their jobs: one that does not exist, has child queues, or whose
    ``submitters`` leave them out."""
    found = stored_cluster.queue_documents(session, [queue]).get(queue)
    closed = why_closed(found, user, admin=role == "admin")
    match closed:
        case None:
            return
        case "missing":
            problem = "does not exist"
            fix = "name an existing leaf queue (phalanx get queues), or create it first"
        case "not-a-leaf":
            problem = "has child queues, and jobs go to leaf queues"
            fix = "name one of its children"
        case "not-a-submitter":
            problem = f"does not list {user} in its submitters"
            fix = f"add {user} to the queue's spec.submitters first, or name another queue"
        case _:
            assert_never(closed)
    raise ApiError(422, f"default queue {queue!r} {problem}", field="default_queue", fix=fix)
