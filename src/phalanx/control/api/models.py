"""``/api/v1/models``: model versions, listed, shown and deleted.

A model belongs to the user of its first version. A user sees and deletes their own
models (another user's is not found); an admin, every model. Versions are made by the
model registrar alone (``controllers.models``), when a job that declares a model
succeeds. A deleted version's number is never given again.
"""

from __future__ import annotations

import time
from typing import Final

from fastapi import APIRouter, Request

from phalanx.control.api.deps import Caller, DbSession, errors
from phalanx.control.auth import Principal
from phalanx.control.errors import ApiError
from phalanx.control.store import model_versions as stored
from phalanx.control.store import services as stored_services
from phalanx.control.store.models import ModelVersionRow
from phalanx.domain.errors import ContentError
from phalanx.spec.model import model_reference
from phalanx.wire.views import ModelFileView, ModelVersionView, ModelView

router = APIRouter(prefix="/api/v1/models", tags=["models"], responses=errors(401, 422))

#: Most files a version's answer lists.
MAX_CONTENTS: Final = 1000


@router.get("", response_model=list[ModelView])
def list_models(caller: Caller, session: DbSession) -> list[ModelView]:
    """The caller's models (an admin's: everyone's) by name, each with its newest version."""
    counts = stored.counts(session)
    return [
        ModelView(name=row.name, user=row.user, versions=counts.get(row.name, 1), latest=view(row))
        for row in stored.latest(session, _owner(caller))
    ]


@router.get("/{name}", response_model=list[ModelVersionView], responses=errors(404))
def list_versions(name: str, caller: Caller, session: DbSession) -> list[ModelVersionView]:
    """Every version of model ``name``, newest first."""
    return [view(row) for row in _versions(session, name, caller)]


@router.get("/{name}/versions/{version}", response_model=ModelVersionView, responses=errors(404))
def get_version(
    name: str, version: int, caller: Caller, session: DbSession, request: Request
) -> ModelVersionView:
    """Version ``version`` of model ``name``, with its files (the first 1000)."""
    row = _version(session, name, version, caller)
    shown = view(row)
    if request.app.state.model_store is None:
        return shown
    try:
        manifest = request.app.state.model_store.manifest(row.digest)
    except ContentError as error:
        raise ApiError(
            500,
            f"{name}:v{version}'s content is not in the model store: {error}",
            field="version",
            fix="an admin checks the model store (phalanx up --models); delete the version",
        ) from None
    shown.contents = [
        ModelFileView(path=entry.path, size=entry.size, digest=entry.digest)
        for entry in manifest.files[:MAX_CONTENTS]
    ]
    return shown


@router.delete("/{name}", response_model=list[ModelVersionView], responses=errors(404, 409))
def delete_model(
    name: str, caller: Caller, session: DbSession, request: Request
) -> list[ModelVersionView]:
    """Delete every version of model ``name``; the answer lists them. The name stays its
    user's, and its numbers are not given again. Refused (409) while a job not ended
    or an inference service reads one of them."""
    rows = _versions(session, name, caller)
    _refuse_in_use(session, name, {row.version for row in rows})
    gone = [view(row) for row in rows]
    stored.delete(session, name, None, now=time.time())
    request.app.state.models_deleted()
    return gone


@router.delete(
    "/{name}/versions/{version}",
    response_model=list[ModelVersionView],
    responses=errors(404, 409),
)
def delete_version(
    name: str, version: int, caller: Caller, session: DbSession, request: Request
) -> list[ModelVersionView]:
    """Delete version ``version`` of model ``name``; the answer lists it. Refused (409)
    while a job not ended or an inference service reads it."""
    gone = [view(_version(session, name, version, caller))]
    _refuse_in_use(session, name, {version})
    stored.delete(session, name, version, now=time.time())
    request.app.state.models_deleted()
    return gone


def view(row: ModelVersionRow) -> ModelVersionView:
    """The API's view of ``row`` (without its files)."""
    return ModelVersionView(
        name=row.name,
        version=row.version,
        digest=row.digest,
        size=row.size,
        files=row.files,
        user=row.user,
        created_at=row.created_at,
        job=row.job,
        role=row.role,
        run_id=row.run_id,
        step=row.step,
        lineage=row.lineage,
        image_phase=row.image_phase,
        image=row.image,
        image_message=row.image_message or "",
    )


def _owner(caller: Principal) -> str | None:
    """Whose models ``caller`` sees: their own, or everyone's (None) for an admin."""
    return None if caller.is_admin else caller.name


def _versions(session: DbSession, name: str, caller: Principal) -> list[ModelVersionRow]:
    """Model ``name``'s versions if the caller may see it; another user's is not found."""
    rows = list(stored.versions(session, name))
    if not rows or (not caller.is_admin and rows[0].user != caller.name):
        raise ApiError(
            404, f"no model {name!r}", field="name", fix="list the models: phalanx get models"
        )
    return rows


def _version(session: DbSession, name: str, version: int, caller: Principal) -> ModelVersionRow:
    """Version ``version`` of model ``name`` if the caller may see it."""
    rows = _versions(session, name, caller)
    found = next((row for row in rows if row.version == version), None)
    if found is None:
        numbers = ", ".join(f"v{row.version}" for row in rows)
        raise ApiError(
            404,
            f"model {name} has no version v{version}",
            field="version",
            fix=f"name one of its versions ({numbers})",
        )
    return found


def _refuse_in_use(session: DbSession, name: str, numbers: set[int]) -> None:
    """409 naming a job not ended, or an inference service, that reads version
    ``numbers`` of model ``name``."""
    readers = [(f"job {job}", document) for job, document in stored.readers(session)]
    readers += [
        (f"inference {row.name}", row.document) for row in stored_services.listing(session, None)
    ]
    for reader, document in readers:
        spec = document.get("spec", {})
        for part in (*spec.get("roles", []), *spec.get("predictors", [])):
            written = part.get("modelVersion")
            if not isinstance(written, str):
                continue
            ref = model_reference(written)
            if ref.name == name and ref.version in numbers:
                raise ApiError(
                    409,
                    f"{name}:v{ref.version} is read by {reader}",
                    field="version",
                    fix=f"delete {reader} (or wait for a job to end), then the version",
                )
