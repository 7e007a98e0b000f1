"""``/api/v1/inferences``: apply, read and delete inference services.

A service belongs to its user (an admin may apply one for another user); users see and
change their own, admins all; another user's service answers 404. Its model versions
are pinned when it is applied (``submit.pin_model``): a service serves the versions it
was applied with until it is applied again. The serving controller
(``controllers.serving``) makes and removes its replicas; the gateway routes
``/serve/NAME/`` to them.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from phalanx.control.api.deps import Caller, DbSession, TheController, document_of, errors, owned
from phalanx.control.api.service_views import view, views, visible
from phalanx.control.auth import Principal
from phalanx.control.controllers.intents import Intent
from phalanx.control.errors import ApiError
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import rollouts as stored_rollouts
from phalanx.control.store import services as stored
from phalanx.control.submit import pin_model, why_closed
from phalanx.spec.inference import InferenceDocument
from phalanx.wire.views import InferenceView

router = APIRouter(prefix="/api/v1/inferences", tags=["inferences"], responses=errors(401, 422))

InferenceBody = Annotated[dict[str, Any], Body(description="an Inference document")]


@router.get("", response_model=list[InferenceView])
def list_inferences(caller: Caller, session: DbSession) -> list[InferenceView]:
    """The caller's services (an admin's: everyone's), by name."""
    return views(session, stored.listing(session, None if caller.is_admin else caller.name))


@router.get("/{name}", response_model=InferenceView, responses=errors(404))
def get_inference(name: str, caller: Caller, session: DbSession) -> InferenceView:
    """One service, with its predictors' replicas."""
    return view(session, visible(session, name, caller))


@router.post("", status_code=201, response_model=InferenceView, responses=errors(400, 404, 409))
def create_inference(
    body: InferenceBody, caller: Caller, session: DbSession, request: Request
) -> InferenceView:
    """Apply a new service (409 if the name is taken: update it with PUT)."""
    document = _checked(session, body, caller)
    name = document.metadata.name
    held = stored.get(session, name)
    if held is not None:
        mine = held.user == caller.name or caller.is_admin
        raise ApiError(
            409,
            f"inference {name!r} already exists" if mine else f"the name {name!r} is taken",
            field="metadata.name",
            fix="update it with PUT (phalanx apply does)"
            if mine
            else "choose another name: service names are unique across all users",
        )
    stored.add(session, name, document.spec.user, _dump(document), now=time.time())
    session.flush()
    answer = view(session, visible(session, name, caller))
    session.commit()
    _applied(request, name)
    return answer


@router.put("/{name}", response_model=InferenceView, responses=errors(400, 404, 409))
def update_inference(
    name: str, body: InferenceBody, caller: Caller, session: DbSession, request: Request
) -> InferenceView:
    """Replace a service's document (its name cannot change): replicas of predictors it
    no longer has, or has fewer of, are removed; new ones are made. Refused (409) while a
    rollout of it is under way."""
    return replace_inference(session, request, caller, name, body)


def replace_inference(
    session: DbSession, request: Request, caller: Principal, name: str, body: Any
) -> InferenceView:
    """Replace service ``name``'s document with ``body`` (see ``update_inference``),
    committed; its view."""
    row = visible(session, name, caller)
    for rollout in stored_rollouts.progressing(session, name):
        raise ApiError(
            409,
            f"rollout {rollout.id} of {name} is under way ({rollout.predictor} to "
            f"{rollout.to_version})",
            field="name",
            fix=f"wait for it to end, or stop it: phalanx rollout {name} --abort",
        )
    document = _checked(session, body, caller)
    if document.metadata.name != name:
        raise ApiError(
            422,
            f"the document names inference {document.metadata.name!r}, the URL {name!r}",
            field="metadata.name",
            fix="make them equal; a service cannot be renamed",
        )
    row.document, row.updated_at = _dump(document), time.time()
    answer = view(session, row)
    session.commit()
    _applied(request, name)
    return answer


@router.delete("/{name}", status_code=204, responses=errors(404))
def delete_inference(
    name: str, caller: Caller, session: DbSession, controller: TheController, request: Request
) -> None:
    """Delete a service: the gateway stops routing to it and its replicas' jobs are
    cancelled and deleted."""
    visible(session, name, caller)
    jobs = stored.remove(session, name)
    stored_rollouts.remove_for(session, name)
    stored_jobs.request_cancel(session, jobs, delete=True)
    session.commit()
    controller.wake(Intent.CANCELS)
    serving = request.app.state.serving
    if serving is not None:
        serving.deleted(name)


def _checked(session: DbSession, body: Any, caller: Principal) -> InferenceDocument:
    """``body`` validated, owned by the caller (an admin may name another user), its
    queue open to that user and its model versions pinned."""
    document = document_of(body, InferenceDocument, "inferences")
    document = owned(document, caller)
    spec = document.spec
    found = stored_cluster.queue_documents(session, [spec.queue]).get(spec.queue)
    closed = why_closed(found, spec.user, admin=caller.is_admin)
    if closed is not None:
        raise ApiError(
            422,
            f"queue {spec.queue!r} takes no jobs of user {spec.user} ({closed})",
            field="spec.queue",
            fix="name an existing leaf queue the user may submit to (phalanx get queues)",
        )
    predictors = list(spec.predictors)
    for i, predictor in enumerate(predictors):
        field = f"spec.predictors[{i}].modelVersion"
        pinned = pin_model(session, predictor.model_version, spec.user, field=field)
        if isinstance(pinned, ApiError):
            raise pinned
        predictors[i] = predictor.model_copy(update={"model_version": pinned})
    pinned_spec = spec.model_copy(update={"predictors": predictors})
    return document.model_copy(update={"spec": pinned_spec})


def _dump(document: InferenceDocument) -> dict[str, Any]:
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)


def _applied(request: Request, name: str) -> None:
    serving = request.app.state.serving
    if serving is not None:
        serving.applied(name)
