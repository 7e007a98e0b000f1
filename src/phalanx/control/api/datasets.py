"""``/api/v1/datasets``: create, replace, list, list again and delete users' datasets.

A dataset is its user's, as a secret is: alice's ``imagenet`` and bob's are two
datasets; another user's answers 404, as one that does not exist. An admin lists
everyone's, reaches another user's as ``/datasets/NAME?user=alice``, and may create one
for another user by naming them in ``spec.user``. A dataset naming a secret is accepted
only when its user has that secret: the secret's values are read by the server's lister
and the nodes, never answered here. Creating or changing a dataset, or
``POST .../refresh``, has its source listed soon (``controllers.datasets``);
``POST .../warm`` has its current listing copied into nodes' caches soon
(``controllers.warming``), and every view says which nodes hold it.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request

from phalanx.control.api.deps import Caller, DbSession, addressed_user, document_of, errors, owned
from phalanx.control.auth import Principal
from phalanx.control.controllers.warming import DatasetWarmer
from phalanx.control.errors import ApiError
from phalanx.control.store import datasets as stored
from phalanx.control.store import secrets as stored_secrets
from phalanx.control.store.models import DatasetRow
from phalanx.spec.dataset import DatasetDocument
from phalanx.wire.bodies import WarmRequest
from phalanx.wire.views import DatasetNodeView, DatasetView

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"], responses=errors(401, 422))

DatasetBody = Annotated[dict[str, Any], Body(description="a Dataset document")]
#: Whose dataset a route addresses: the caller's unless an admin names another user.
Owner = Annotated[
    str | None,
    Query(max_length=253, description="the dataset's user (admins; default: the caller)"),
]


@router.get("", response_model=list[DatasetView])
def list_datasets(caller: Caller, session: DbSession, request: Request) -> list[DatasetView]:
    """The caller's datasets (an admin's: everyone's), by user, then name."""
    rows = stored.listing(session, None if caller.is_admin else caller.name)
    return [view_of(row, request) for row in rows]


@router.get("/{name}", response_model=DatasetView, responses=errors(404))
def get_dataset(
    name: str, caller: Caller, session: DbSession, request: Request, user: Owner = None
) -> DatasetView:
    """One dataset: its document, its last listing, and the nodes' caches with it."""
    return view_of(_visible(session, name, addressed_user(caller, user)), request)


@router.post("", status_code=201, response_model=DatasetView, responses=errors(400, 409))
def create_dataset(
    body: DatasetBody, caller: Caller, session: DbSession, request: Request
) -> DatasetView:
    """Create a dataset (409 if its user has one of that name: replace it with PUT);
    its source is listed soon."""
    document = _checked(session, body, caller)
    user, name = document.spec.user, document.metadata.name
    if stored.get(session, user, name) is not None:
        raise ApiError(
            409,
            f"user {user} already has a dataset {name!r}",
            field="metadata.name",
            fix="update it with PUT (phalanx apply does)",
        )
    stored.put(session, user, name, _json(document), now=time.time())
    return _stored(session, request, user, name)


@router.put("/{name}", response_model=DatasetView, responses=errors(400, 404))
def replace_dataset(
    name: str, body: DatasetBody, caller: Caller, session: DbSession, request: Request
) -> DatasetView:
    """Replace a dataset's document (its name and user cannot change); a changed one is
    listed again, and jobs started after that read the new listing."""
    document = _checked(session, body, caller)
    if document.metadata.name != name:
        raise ApiError(
            422,
            f"the document names dataset {document.metadata.name!r}, the URL {name!r}",
            field="metadata.name",
            fix="make them equal; a dataset cannot be renamed (create the new one)",
        )
    _visible(session, name, document.spec.user)
    stored.put(session, document.spec.user, name, _json(document), now=time.time())
    return _stored(session, request, document.spec.user, name)


@router.post("/{name}/refresh", response_model=DatasetView, responses=errors(404))
def refresh_dataset(
    name: str, caller: Caller, session: DbSession, request: Request, user: Owner = None
) -> DatasetView:
    """List the dataset's source again (its data changed): jobs started after the new
    listing read the new data."""
    owner = addressed_user(caller, user)
    _visible(session, name, owner)
    stored.relist(session, owner, name)
    return _stored(session, request, owner, name)


@router.post(
    "/{name}/warm",
    status_code=202,
    response_model=DatasetView,
    responses=errors(400, 404, 409, 501),
)
def warm_dataset(
    name: str,
    caller: Caller,
    session: DbSession,
    request: Request,
    body: WarmRequest | None = None,
    user: Owner = None,
) -> DatasetView:
    """Copy the dataset's current listing into the caches of the nodes named (none:
    every node) soon, ahead of the jobs that read it; ``nodes`` in the answer, and in
    later reads, says how far each got."""
    owner = addressed_user(caller, user)
    row = _visible(session, name, owner)
    warmer = request.app.state.dataset_warmer
    if warmer is None:
        raise ApiError(
            501,
            "this server warms no dataset",
            fix="run the server with phalanx up, which warms datasets",
        )
    if row.digest is None:
        raise ApiError(
            409,
            f"dataset {name!r} was never listed ({row.phase}: {row.message or 'listing'})",
            field="name",
            fix="wait for its listing (phalanx describe dataset NAME), or fix its source",
        )
    warmer.ask(owner, name, [] if body is None else body.nodes)
    return view_of(row, request)


@router.delete("/{name}", status_code=204, responses=errors(404))
def delete_dataset(name: str, caller: Caller, session: DbSession, user: Owner = None) -> None:
    """Delete a dataset; its copies in the nodes' caches go when room is needed, as any
    copy that no task reads."""
    owner = addressed_user(caller, user)
    if not stored.remove(session, owner, name):
        raise _missing(name, owner)
    session.commit()


def view_of(row: DatasetRow, request: Request) -> DatasetView:
    """``row`` as the API shows it, with its nodes' caches as the server's warmer
    sees them."""
    warmer: DatasetWarmer | None = request.app.state.dataset_warmer
    states = [] if warmer is None else warmer.states(row.user, row.name, row.digest)
    return DatasetView(
        name=row.name,
        user=row.user,
        document=row.document,
        phase=row.phase,
        message=row.message,
        files=row.files,
        size=row.size,
        digest=row.digest,
        listed_at=row.listed_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        nodes=[DatasetNodeView(node=s.node, state=s.state, message=s.message) for s in states],
    )


def _visible(session: DbSession, name: str, user: str) -> DatasetRow:
    row = stored.get(session, user, name) if user else None
    if row is None:
        raise _missing(name, user)
    return row


def _missing(name: str, user: str) -> ApiError:
    return ApiError(
        404,
        f"no dataset named {name!r}" + (f" of user {user}" if user else ""),
        field="name",
        fix="list them: phalanx get datasets; create one with phalanx apply -f DATASET.yaml",
    )


def _checked(session: DbSession, body: Any, caller: Principal) -> DatasetDocument:
    """``body`` validated, owned by the caller (an admin may name another user), and
    naming only a secret its user has."""
    document = document_of(body, DatasetDocument, "datasets")
    document = owned(document, caller)
    secret = document.spec.secret
    if secret is not None and stored_secrets.get(session, document.spec.user, secret) is None:
        raise ApiError(
            422,
            f"user {document.spec.user} has no secret {secret!r}",
            field="spec.secret",
            fix="create it first (phalanx secret create NAME --from-literal key=... "
            "--from-literal secret=...), or omit spec.secret",
        )
    return document


def _json(document: DatasetDocument) -> dict[str, Any]:
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)


def _stored(session: DbSession, request: Request, user: str, name: str) -> DatasetView:
    """The view of what was just written, committed before it is answered; the lister
    is woken to list it."""
    session.flush()
    row = stored.get(session, user, name)
    assert row is not None, (user, name)
    answer = view_of(row, request)
    session.commit()
    wake = getattr(request.app.state, "datasets_changed", None)
    if wake is not None:
        wake()
    return answer
