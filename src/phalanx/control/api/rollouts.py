"""``/api/v1/inferences/NAME/rollouts``: start a rollout of a predictor to another model
version, or stop the one under way.

Starting one adds its canary predictor to the service's document at once (the new
version at the first step's share); the serving controller's ``RolloutDriver`` then
promotes it step by step, completes it or rolls it back (``controllers.rollouts``). One
rollout at a time per service; while it runs, the service's document cannot be replaced
(PUT answers 409). Who may see a service may roll it (its owner, or an admin).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from pydantic import ValidationError

from phalanx.control.api.deps import Caller, DbSession, errors
from phalanx.control.api.service_views import rollout_view, visible
from phalanx.control.errors import ApiError
from phalanx.control.store import rollouts as stored
from phalanx.control.store.models import RolloutRow
from phalanx.control.submit import pin_model
from phalanx.spec.diagnostics import problems_of
from phalanx.spec.inference import InferenceDocument, PredictorSpec
from phalanx.spec.model import model_reference
from phalanx.spec.rollout import RolloutSpec, canary_name, split
from phalanx.wire.views import RolloutView

router = APIRouter(
    prefix="/api/v1/inferences/{name}/rollouts",
    tags=["inferences"],
    responses=errors(401, 404, 422),
)

RolloutBody = Annotated[
    dict[str, Any],
    Body(
        description="{to, predictor, steps, interval, maxErrorRate, maxP99, minRequests, "
        "readyTimeout}: only to is required"
    ),
]


@router.post("", status_code=201, response_model=RolloutView, responses=errors(400, 409))
def start_rollout(
    name: str, body: RolloutBody, caller: Caller, session: DbSession, request: Request
) -> RolloutView:
    """Start rolling a predictor of service ``name`` to another model version (409 while
    another rollout of it is under way)."""
    service = visible(session, name, caller)
    spec = _spec(body)
    under_way = stored.progressing(session, name)
    if under_way:
        raise ApiError(
            409,
            f"rollout {under_way[0].id} of {name} is under way "
            f"({under_way[0].predictor} to {under_way[0].to_version})",
            field="name",
            fix=f"wait for it to end, or stop it: phalanx rollout {name} --abort",
        )
    document = InferenceDocument.model_validate(service.document)
    predictor = _predictor(document, spec)
    canary = canary_name(predictor.name)
    if any(p.name == canary for p in document.spec.predictors):
        raise ApiError(
            409,
            f"service {name} already has a predictor named {canary}",
            field="predictor",
            fix=f"rename or remove predictor {canary} before rolling {predictor.name}",
        )
    model = model_reference(predictor.model_version).name
    pinned = pin_model(session, spec.reference(model), service.user, field="to")
    if isinstance(pinned, ApiError):
        raise pinned
    if pinned == predictor.model_version:
        raise ApiError(
            409,
            f"predictor {predictor.name} already serves {pinned}",
            field="to",
            fix="name another version (phalanx get models " + model + ")",
        )
    now = time.time()
    first = spec.steps[0]
    rolled = split(document, predictor.name, canary, pinned, base=predictor.traffic, share=first)
    service.document = rolled.model_dump(mode="json", by_alias=True, exclude_none=True)
    service.updated_at = now
    row = stored.add(
        session,
        service=name,
        predictor=predictor.name,
        canary=canary,
        from_version=predictor.model_version,
        to_version=pinned,
        base_traffic=predictor.traffic,
        steps=spec.steps,
        step=0,
        phase=stored.PROGRESSING,
        reason=f"step 1 of {len(spec.steps)}: {first}% from now",
        user=caller.name,
        settings=spec.model_dump(mode="json", by_alias=True),
        history=[
            {
                "at": now,
                "action": "started",
                "traffic": first,
                "reason": f"{first}% of {predictor.name}'s traffic to {pinned}",
            }
        ],
        started_at=now,
        step_started_at=now,
    )
    answer = rollout_view(row)
    session.commit()
    _poke(request, name)
    return answer


@router.post("/abort", status_code=202, response_model=RolloutView)
def abort_rollout(name: str, caller: Caller, session: DbSession, request: Request) -> RolloutView:
    """Stop the rollout of service ``name`` under way: it is rolled back on the serving
    controller's next pass (the answer shows it as asked; 404 when none is under way)."""
    visible(session, name, caller)
    under_way = stored.progressing(session, name)
    if not under_way:
        raise ApiError(
            404,
            f"no rollout of {name} is under way",
            field="name",
            fix=f"see its rollouts: phalanx describe inference {name}",
        )
    row: RolloutRow = under_way[0]
    stored.ask_abort(session, row.id, caller.name)
    session.refresh(row)
    answer = rollout_view(row)
    session.commit()
    _poke(request, name)
    return answer


def _spec(body: Any) -> RolloutSpec:
    """``body`` as a ``RolloutSpec``; a 422 naming the first bad field and its fix."""
    try:
        return RolloutSpec.model_validate(body)
    except ValidationError as error:
        problem = problems_of(error)[0]
        raise ApiError(422, problem.detail, field=problem.path, fix=problem.fix) from None


def _predictor(document: InferenceDocument, spec: RolloutSpec) -> PredictorSpec:
    """The predictor ``spec`` rolls: the one it names, or the service's only one."""
    names = [p.name for p in document.spec.predictors]
    wanted = spec.predictor
    if wanted is None:
        if len(names) > 1:
            raise ApiError(
                422,
                f"service {document.metadata.name} has {len(names)} predictors",
                field="predictor",
                fix="name the one to roll: one of " + ", ".join(names),
            )
        wanted = names[0]
    for predictor in document.spec.predictors:
        if predictor.name == wanted:
            if predictor.traffic == 0:
                raise ApiError(
                    422,
                    f"predictor {wanted} gets no traffic, so a new version could not be judged",
                    field="predictor",
                    fix="give it a traffic share first, or roll another predictor",
                )
            return predictor
    raise ApiError(
        404,
        f"service {document.metadata.name} has no predictor {wanted!r}",
        field="predictor",
        fix="name one of " + ", ".join(names),
    )


def _poke(request: Request, name: str) -> None:
    serving = request.app.state.serving
    if serving is not None:
        serving.applied(name)
