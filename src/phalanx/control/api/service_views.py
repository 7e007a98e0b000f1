"""What the inference endpoints answer: a service the caller may see, and its view with
its predictors' replicas and its rollouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phalanx.control.api.deps import DbSession
from phalanx.control.auth import Principal
from phalanx.control.errors import ApiError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import rollouts as stored_rollouts
from phalanx.control.store import services as stored
from phalanx.control.store.models import RolloutRow, ServiceReplicaRow, ServiceRow
from phalanx.spec.inference import InferenceDocument
from phalanx.wire.views import (
    InferenceView,
    PredictorView,
    ReplicaView,
    RolloutStepView,
    RolloutView,
)


def visible(session: DbSession, name: str, caller: Principal) -> ServiceRow:
    """Service ``name`` when ``caller`` may see it (its owner, or an admin); otherwise
    the 404 of a service that is not there."""
    row = stored.get(session, name)
    if row is None or (row.user != caller.name and not caller.is_admin):
        raise ApiError(
            404,
            f"no inference named {name!r}",
            field="name",
            fix="list them: phalanx get inferences; apply one: phalanx apply -f FILE",
        )
    return row


def view(session: DbSession, row: ServiceRow) -> InferenceView:
    """``row``'s view."""
    (found,) = views(session, [row])
    return found


def views(session: DbSession, rows: Sequence[ServiceRow]) -> list[InferenceView]:
    """The views of ``rows``: their replicas, those replicas' phases and their rollouts
    read once."""
    names = [row.name for row in rows]
    replicas = stored.replicas(session, names)
    phases = {
        name: outcome.phase
        for name, outcome in stored_jobs.outcomes(session, [r.job for r in replicas]).items()
    }
    endpoints = stored.endpoints(session, [r.job for r in replicas])
    rollouts: dict[str, list[RolloutView]] = {}
    for rollout in stored_rollouts.of_services(session, names):
        rollouts.setdefault(rollout.service, []).append(rollout_view(rollout))
    return [
        _one_view(
            row,
            [r for r in replicas if r.service == row.name],
            phases,
            endpoints,
            rollouts.get(row.name, []),
        )
        for row in rows
    ]


def rollout_view(row: RolloutRow) -> RolloutView:
    """``row`` as the API shows it."""
    settings: dict[str, Any] = row.settings
    return RolloutView(
        id=row.id,
        service=row.service,
        predictor=row.predictor,
        canary=row.canary,
        from_version=row.from_version,
        to_version=row.to_version,
        steps=row.steps,
        step=row.step,
        traffic=0 if row.phase == "RolledBack" else row.steps[row.step],
        phase=row.phase,
        reason=row.reason,
        user=row.user,
        started_at=row.started_at,
        finished_at=row.finished_at,
        interval_seconds=settings["interval"],
        max_error_rate=settings["maxErrorRate"],
        max_p99_seconds=settings.get("maxP99"),
        min_requests=settings["minRequests"],
        ready_timeout_seconds=settings["readyTimeout"],
        history=[RolloutStepView.model_validate(entry) for entry in row.history],
    )


def _one_view(
    row: ServiceRow,
    replicas: Sequence[ServiceReplicaRow],
    phases: Mapping[str, str],
    endpoints: Mapping[str, str],
    rollouts: list[RolloutView],
) -> InferenceView:
    document = InferenceDocument.model_validate(row.document)
    predictors = []
    for predictor in document.spec.predictors:
        mine = [
            ReplicaView(
                job=r.job,
                phase=phases.get(r.job, "Deleted"),
                ready=r.ready,
                endpoint=endpoints.get(r.job),
            )
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
        rollouts=rollouts,
    )
