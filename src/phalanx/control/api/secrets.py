"""``/api/v1/secrets``: create, replace, list and delete users' secrets.

A secret is its user's: user alice's ``s3`` and bob's ``s3`` are two secrets. A user
sees and changes their own; another user's answers 404, as one that does not exist.
An admin lists everyone's, reaches another user's as ``/secrets/NAME?user=alice``, and
may create one for another user by naming them in the document's ``spec.user``.

The values arrive in the body of POST and PUT, are sealed at once by the server's
``SecretBox`` and are never answered, logged or recorded as an event: every answer is a
``SecretView`` (key names and size). A refused body is described by its field alone
(``spec.SecretDocument`` never echoes a value). A server without a secrets key (an app
built without a ``SecretBox``) answers 501 to POST and PUT.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request

from phalanx.control.api.deps import Caller, DbSession, addressed_user, document_of, errors, owned
from phalanx.control.auth import Principal
from phalanx.control.errors import ApiError
from phalanx.control.secretbox import SecretBox
from phalanx.control.store import IntegrityError
from phalanx.control.store import secrets as stored
from phalanx.control.store.models import SecretRow
from phalanx.spec.secret import SecretDocument
from phalanx.wire.views import SecretView

router = APIRouter(prefix="/api/v1/secrets", tags=["secrets"], responses=errors(401, 422))

SecretBody = Annotated[
    dict[str, Any], Body(description="a Secret document (its values are never answered back)")
]
#: Whose secret a route addresses: the caller's unless an admin names another user.
Owner = Annotated[
    str | None,
    Query(
        max_length=253,
        description="the secret's user (admins; default: the caller)",
    ),
]


@router.get("", response_model=list[SecretView])
def list_secrets(caller: Caller, session: DbSession) -> list[SecretView]:
    """The caller's secrets (an admin's: everyone's), by user, then name: key names and
    sizes, never values."""
    rows = stored.listing(session, None if caller.is_admin else caller.name)
    return [_view(row) for row in rows]


@router.get("/{name}", response_model=SecretView, responses=errors(404))
def get_secret(name: str, caller: Caller, session: DbSession, user: Owner = None) -> SecretView:
    """One secret: its key names and size, never its values."""
    return _view(_visible(session, name, addressed_user(caller, user)))


@router.post("", status_code=201, response_model=SecretView, responses=errors(400, 409, 501))
def create_secret(
    body: SecretBody, caller: Caller, session: DbSession, request: Request
) -> SecretView:
    """Create a secret (409 if its user has one of that name: replace it with PUT)."""
    document, box = _checked(body, caller), _box(request)
    user, name = document.spec.user, document.metadata.name
    if stored.get(session, user, name) is not None:
        raise _taken(user, name)
    _put(session, document, box)
    try:
        session.flush()
    except IntegrityError:  # another request created it meanwhile
        raise _taken(user, name) from None
    return _stored(session, user, name)


@router.put("/{name}", response_model=SecretView, responses=errors(400, 404, 501))
def replace_secret(
    name: str, body: SecretBody, caller: Caller, session: DbSession, request: Request
) -> SecretView:
    """Replace a secret's keys and values (its name and user cannot change). Tasks
    started after this get the new values; running ones keep what they were given."""
    document, box = _checked(body, caller), _box(request)
    if document.metadata.name != name:
        raise ApiError(
            422,
            f"the document names secret {document.metadata.name!r}, the URL {name!r}",
            field="metadata.name",
            fix="make them equal; a secret cannot be renamed (create the new one, delete the old)",
        )
    _visible(session, name, document.spec.user)
    _put(session, document, box)
    return _stored(session, document.spec.user, name)


@router.delete("/{name}", status_code=204, responses=errors(404))
def delete_secret(name: str, caller: Caller, session: DbSession, user: Owner = None) -> None:
    """Delete a secret. Jobs that name it and have not started fail to start, saying
    so; running tasks keep what they were given."""
    owner = addressed_user(caller, user)
    if not stored.remove(session, owner, name):
        raise _missing(name, owner)
    session.commit()


def _taken(user: str, name: str) -> ApiError:
    return ApiError(
        409,
        f"user {user} already has a secret {name!r}",
        field="metadata.name",
        fix="update it with PUT (phalanx apply does; phalanx secret create --replace)",
    )


def _visible(session: DbSession, name: str, user: str) -> SecretRow:
    row = stored.get(session, user, name) if user else None
    if row is None:
        raise _missing(name, user)
    return row


def _missing(name: str, user: str) -> ApiError:
    return ApiError(
        404,
        f"no secret named {name!r}" + (f" of user {user}" if user else ""),
        field="name",
        fix="list them: phalanx get secrets; create one: phalanx secret create NAME "
        "--from-literal KEY=VALUE",
    )


def _checked(body: Any, caller: Principal) -> SecretDocument:
    """``body`` validated and owned by the caller (an admin may name another user)."""
    return owned(document_of(body, SecretDocument, "secrets"), caller)


def _box(request: Request) -> SecretBox:
    box: SecretBox | None = request.app.state.secret_box
    if box is None:
        raise ApiError(
            501,
            "this server keeps no secrets key, so it cannot store secrets",
            fix="start the server with phalanx up (it keeps DATA_DIR/secrets.key)",
        )
    return box


def _put(session: DbSession, document: SecretDocument, box: SecretBox) -> None:
    values = document.values()
    stored.put(
        session,
        document.spec.user,
        document.metadata.name,
        list(values),
        box.seal(values),
        sum(len(value) for value in values.values()),
        now=time.time(),
    )


def _stored(session: DbSession, user: str, name: str) -> SecretView:
    """The view of what was just put, committed before it is answered."""
    session.flush()
    row = stored.get(session, user, name)
    assert row is not None, (user, name)
    answer = _view(row)
    session.commit()
    return answer


def _view(row: SecretRow) -> SecretView:
    return SecretView(
        name=row.name,
        user=row.user,
        keys=sorted(row.keys),
        size=row.size,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
