"""``/api/v1/tunings``: right-sizing experiments (issue 40), and their recommendation.

A tuning belongs to its user (an admin may create one for another user) and tunes a
predictor of one of that user's inference services; another user's tuning answers 404.
The tuning controller (``controllers.tuning``) runs its trials, each a replica of the
predictor with one candidate spec. ``POST .../stop`` ends it early (its trials' replicas
are cancelled); ``POST .../apply`` writes the best trial's spec into the service
(``phalanx tune apply``), whose replicas the serving controller then replaces; ``DELETE``
forgets it and cancels what still runs.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from pydantic import ValidationError

from phalanx.control.api.deps import Caller, DbSession, TheController, document_of, errors, owned
from phalanx.control.api.inferences import replace_inference
from phalanx.control.api.service_views import visible as visible_service
from phalanx.control.auth import Principal
from phalanx.control.controllers.intents import Intent
from phalanx.control.errors import ApiError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import tunings as stored
from phalanx.control.store.models import TrialRow, TuningRow
from phalanx.control.tuned import best_trial, tuned_inference
from phalanx.domain.errors import InvalidInput
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.job import JobDocument, JobSpec
from phalanx.spec.tuning import TuningDocument, TuningSpec
from phalanx.wire.views import InferenceView, TrialView, TuningView

router = APIRouter(prefix="/api/v1/tunings", tags=["tunings"], responses=errors(401, 422))

TuningBody = Annotated[dict[str, Any], Body(description="a Tuning document")]


@router.get("", response_model=list[TuningView])
def list_tunings(caller: Caller, session: DbSession) -> list[TuningView]:
    """The caller's tunings (an admin's: everyone's), by name."""
    rows = stored.listing(session, None if caller.is_admin else caller.name)
    return [view_of(session, row) for row in rows]


@router.get("/{name}", response_model=TuningView, responses=errors(404))
def get_tuning(name: str, caller: Caller, session: DbSession) -> TuningView:
    """One tuning, with every trial and the best so far."""
    return view_of(session, _visible(session, name, caller))


@router.post("", status_code=201, response_model=TuningView, responses=errors(400, 404, 409))
def create_tuning(
    body: TuningBody, caller: Caller, session: DbSession, request: Request
) -> TuningView:
    """Start a tuning (409 if the name is taken); its trials start soon."""
    document = document_of(body, TuningDocument, "tunings")
    document = owned(document, caller)
    name, spec = document.metadata.name, document.spec
    held = stored.get(session, name)
    if held is not None:
        mine = held.user == caller.name or caller.is_admin
        raise ApiError(
            409,
            f"tuning {name!r} already exists" if mine else f"the name {name!r} is taken",
            field="metadata.name",
            fix="delete it first (phalanx delete tuning NAME), or choose another name"
            if mine
            else "choose another name: tuning names are unique across all users",
        )
    if spec.job is not None:
        _check_job(spec.job, spec.user, name)
    else:
        _check_service(session, caller, spec)
    dumped = document.model_dump(mode="json", by_alias=True, exclude_none=True)
    stored.add(session, name, spec.user, dumped, now=time.time())
    session.flush()
    row = stored.get(session, name)
    assert row is not None
    answer = view_of(session, row)
    session.commit()
    _poke(request)
    return answer


@router.post("/{name}/stop", response_model=TuningView, responses=errors(404))
def stop_tuning(
    name: str, caller: Caller, session: DbSession, controller: TheController, request: Request
) -> TuningView:
    """End a tuning now: Stopped, its trials under way stopped and their replicas
    cancelled; what was measured stays (an ended tuning is left as it is)."""
    row = _visible(session, name, caller)
    now = time.time()
    if stored.end(session, name, stored.STOPPED, f"stopped by {caller.name}", now=now):
        _stop_trials(session, name, now=now)
    session.flush()
    answer = view_of(session, row)
    session.commit()
    controller.wake(Intent.CANCELS)
    _poke(request)
    return answer


@router.post("/{name}/apply", response_model=InferenceView, responses=errors(404, 409))
def apply_tuning(name: str, caller: Caller, session: DbSession, request: Request) -> InferenceView:
    """Write the best trial's spec into the tuned predictor of the service (the
    resources and variables the tuning set; the rest as it was): the serving controller
    replaces its replicas with ones of that spec. 409 before a trial met the objective,
    or while a rollout of the service is under way."""
    row = _visible(session, name, caller)
    document = TuningDocument.model_validate(row.document)
    best = best_trial(document, stored.trials(session, name))
    if best is None:
        raise ApiError(
            409,
            f"tuning {name!r} has no trial that met its objective yet",
            field="name",
            fix="wait for its trials (phalanx describe tuning NAME), or widen its space",
        )
    spec = document.spec
    if spec.inference is None:
        raise ApiError(
            409,
            f"tuning {name!r} tuned a training job: there is no service to write it into",
            field="name",
            fix="submit the job with the best trial's values (phalanx describe tuning NAME)",
        )
    service = visible_service(session, spec.inference, caller)
    try:
        tuned = tuned_inference(
            InferenceDocument.model_validate(service.document), spec, best.params
        )
    except InvalidInput as error:
        raise ApiError(409, error.message, field=error.field, fix=error.fix) from None
    body = tuned.model_dump(mode="json", by_alias=True, exclude_none=True)
    return replace_inference(session, request, caller, spec.inference, body)


@router.delete("/{name}", status_code=204, responses=errors(404))
def delete_tuning(name: str, caller: Caller, session: DbSession, controller: TheController) -> None:
    """Forget a tuning and its trials; replicas of trials under way are cancelled."""
    _visible(session, name, caller)
    jobs = [
        t.job for t in stored.trials(session, name) if t.job and t.state not in stored.TRIAL_ENDED
    ]
    stored.remove(session, name)
    stored_jobs.request_cancel(session, jobs, delete=True)
    session.commit()
    controller.wake(Intent.CANCELS)


def _check_service(session: DbSession, caller: Principal, spec: TuningSpec) -> None:
    """Refuse a tuning of a service its user does not have, or of a predictor it lacks."""
    service = visible_service(session, spec.inference or "", caller)
    if service.user != spec.user:
        raise ApiError(
            404,
            f"user {spec.user} has no inference {spec.inference!r}",
            field="spec.inference",
            fix="tune one of the user's own services (phalanx get inferences)",
        )
    inference = InferenceDocument.model_validate(service.document)
    predictors = [p.name for p in inference.spec.predictors]
    if spec.predictor is not None and spec.predictor not in predictors:
        raise ApiError(
            422,
            f"inference {spec.inference!r} has no predictor {spec.predictor!r}",
            field="spec.predictor",
            fix="name one of " + ", ".join(predictors) + ", or omit it (the first)",
        )


def _check_job(job: JobSpec, user: str, name: str) -> None:
    """Refuse a training tuning whose job would not be a valid Job of ``user``."""
    raw = job.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        JobDocument.model_validate(
            {"apiVersion": "phalanx/v1", "kind": "Job", "metadata": {"name": f"{name}-trial-0"},
             "spec": {**raw, "user": user}}
        )  # fmt: skip
    except ValidationError as error:
        raise ApiError(
            422,
            f"spec.job is not a valid job: {error.errors()[0]['msg']}",
            field="spec.job",
            fix="give a job's spec (queue, roles)",
        ) from None


def view_of(session: DbSession, row: TuningRow) -> TuningView:
    """``row`` with its trials and the best one."""
    trials = stored.trials(session, row.name)
    document = TuningDocument.model_validate(row.document)
    best = best_trial(document, trials)
    return TuningView(
        name=row.name,
        user=row.user,
        document=row.document,
        phase=row.phase,
        message=row.message,
        trials=[trial_view(t) for t in trials],
        best=None if best is None else trial_view(best),
        created_at=row.created_at,
        updated_at=row.updated_at,
        ended_at=row.ended_at,
    )


def trial_view(trial: TrialRow) -> TrialView:
    """One trial as the API shows it."""
    return TrialView(
        number=trial.number,
        params=trial.params,
        state=trial.state,
        message=trial.message,
        job=trial.job,
        node=trial.node,
        metrics=trial.metrics,
        cost=trial.cost,
        value=trial.value,
        feasible=trial.feasible,
        created_at=trial.created_at,
        ended_at=trial.ended_at,
    )


def _stop_trials(session: DbSession, name: str, *, now: float) -> None:
    """Stop every trial of ``name`` not ended, cancelling its replica."""
    jobs = []
    for trial in stored.trials(session, name):
        if trial.state in stored.TRIAL_ENDED:
            continue
        stored.update_trial(
            session,
            name,
            trial.number,
            state=stored.TRIAL_STOPPED,
            message="the tuning stopped",
            ended_at=now,
        )
        if trial.job:
            jobs.append(trial.job)
    stored_jobs.request_cancel(session, jobs, delete=True)


def _visible(session: DbSession, name: str, caller: Principal) -> TuningRow:
    row = stored.get(session, name)
    if row is None or (row.user != caller.name and not caller.is_admin):
        raise ApiError(
            404,
            f"no tuning named {name!r}",
            field="name",
            fix="list them: phalanx get tunings; start one: phalanx tune -f FILE",
        )
    return row


def _poke(request: Request) -> None:
    tuner = getattr(request.app.state, "tuner", None)
    if tuner is not None:
        tuner.poke()
