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
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from phalanx.control.api.deps import Caller, DbSession, TheController, document_of, errors
from phalanx.control.auth import Principal
from phalanx.control.controllers.intents import Intent
from phalanx.control.errors import ApiError
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import services as stored
from phalanx.control.store.models import ServiceReplicaRow, ServiceRow
from phalanx.control.submit import pin_model, why_closed
from phalanx.spec.inference import InferenceDocument
from phalanx.wire.views import InferenceView, PredictorView, ReplicaView

router = APIRouter(prefix="/api/v1/inferences", tags=["inferences"], responses=errors(401, 422))

InferenceBody = Annotated[dict[str, Any], Body(description="an Inference document")]


@router.get("", response_model=list[InferenceView])
def list_inferences(caller: Caller, session: DbSession) -> list[InferenceView]:
    """The caller's services (an admin's: everyone's), by name."""
    return _views(session, stored.listing(session, None if caller.is_admin else caller.name))


@router.get("/{name}", response_model=InferenceView, responses=errors(404))
def get_inference(name: str, caller: Caller, session: DbSession) -> InferenceView:
    """One service, with its predictors' replicas."""
    return _view(session, _visible(session, name, caller))


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
    view = _view(session, _visible(session, name, caller))
    session.commit()
    _applied(request, name)
    return view


@router.put("/{name}", response_model=InferenceView, responses=errors(400, 404, 409))
def update_inference(
    name: str, body: InferenceBody, caller: Caller, session: DbSession, request: Request
) -> InferenceView:
    """Replace a service's document (its name cannot change): replicas of predictors it
    no longer has, or has fewer of, are removed; new ones are made."""
    row = _visible(session, name, caller)
    document = _checked(session, body, caller)
    if document.metadata.name != name:
        raise ApiError(
            422,
            f"the document names inference {document.metadata.name!r}, the URL {name!r}",
            field="metadata.name",
            fix="make them equal; a service cannot be renamed",
        )
    row.document, row.updated_at = _dump(document), time.time()
    view = _view(session, row)
    session.commit()
    _applied(request, name)
    return view


@router.delete("/{name}", status_code=204, responses=errors(404))
def delete_inference(
    name: str, caller: Caller, session: DbSession, controller: TheController, request: Request
) -> None:
    """Delete a service: the gateway stops routing to it and its replicas' jobs are
    cancelled and deleted."""
    _visible(session, name, caller)
    jobs = stored.remove(session, name)
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
    if not caller.is_admin or "user" not in document.spec.model_fields_set:
        spec = document.spec.model_copy(update={"user": caller.name})
        document = document.model_copy(update={"spec": spec})
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


def _visible(session: DbSession, name: str, caller: Principal) -> ServiceRow:
    row = stored.get(session, name)
    if row is None or (row.user != caller.name and not caller.is_admin):
        raise ApiError(
            404,
            f"no inference named {name!r}",
            field="name",
            fix="list them: phalanx get inferences; apply one: phalanx apply -f FILE",
        )
    return row


def _dump(document: InferenceDocument) -> dict[str, Any]:
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)


def _applied(request: Request, name: str) -> None:
    serving = request.app.state.serving
    if serving is not None:
        serving.applied(name)


def _view(session: DbSession, row: ServiceRow) -> InferenceView:
    (view,) = _views(session, [row])
    return view


def _views(session: DbSession, rows: Sequence[ServiceRow]) -> list[InferenceView]:
    """The views of ``rows``, their replicas and those replicas' phases read once."""
    replicas = stored.replicas(session, [row.name for row in rows])
    phases = {
        name: outcome.phase
        for name, outcome in stored_jobs.outcomes(session, [r.job for r in replicas]).items()
    }
    return [_one_view(row, [r for r in replicas if r.service == row.name], phases) for row in rows]


def _one_view(
    row: ServiceRow, replicas: Sequence[ServiceReplicaRow], phases: Mapping[str, str]
) -> InferenceView:
    document = InferenceDocument.model_validate(row.document)
    predictors = []
    for predictor in document.spec.predictors:
        mine = [
            ReplicaView(job=r.job, phase=phases.get(r.job, "Deleted"), ready=r.ready, port=r.port)
            for r in replicas
            if r.predictor == predictor.name
        ]
        predictors.append(
            PredictorView(
                name=predictor.name,
                model_version=predictor.model_version,
                traffic=predictor.traffic,
                min_replicas=predictor.min_replicas,
                max_replicas=predictor.most_replicas,
                ready=sum(r.ready for r in mine),
                replicas=mine,
            )
        )
    return InferenceView(
        name=row.name,
        user=row.user,
        created_at=row.created_at,
        updated_at=row.updated_at,
        url=f"/serve/{row.name}/",
        ready=all(p.ready > 0 for p in predictors if p.traffic > 0),
        predictors=predictors,
        document=row.document,
    )
