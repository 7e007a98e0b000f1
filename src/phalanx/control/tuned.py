"""A tuning's outcome: its best trial, and the service document that applies it.

Guarantees: ``best_trial`` is a Complete trial that met the objective (feasible), the
lowest value for ``cheapest`` and the highest for ``throughputPerCost``, the earliest on
a tie; None before one. ``tuned_inference`` changes exactly the tuned predictor's
resources and variables the tuning's parameters name, to the trial's values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phalanx.control.store import tunings as stored
from phalanx.control.store.models import TrialRow
from phalanx.domain.errors import InvalidInput
from phalanx.spec.inference import InferenceDocument, PredictorSpec
from phalanx.spec.tuning import TuningDocument, TuningSpec


def best_trial(document: TuningDocument, trials: Sequence[TrialRow]) -> TrialRow | None:
    """The best trial of ``trials`` by ``document``'s objective (module docstring)."""
    done = [t for t in trials if t.state == stored.COMPLETE and t.feasible and t.value is not None]
    if not done:
        return None
    sign = 1.0 if document.spec.objective.goal == "cheapest" else -1.0
    return min(done, key=lambda t: (sign * float(t.value or 0.0), t.number))


def tuned_predictor(inference: InferenceDocument, spec: TuningSpec) -> PredictorSpec:
    """The predictor of ``inference`` that ``spec`` tunes (its first when unnamed).
    Raises ``InvalidInput`` when the service no longer has it."""
    for predictor in inference.spec.predictors:
        if spec.predictor in (None, predictor.name):
            return predictor
    raise InvalidInput(
        f"inference {spec.inference!r} has no predictor {spec.predictor!r} any more",
        field="spec.predictor",
        fix="start a tuning of one of its predictors",
    )


def with_params(
    predictor: PredictorSpec, spec: TuningSpec, params: Mapping[str, Any]
) -> PredictorSpec:
    """``predictor`` with the resources and variables of ``params`` (by ``spec``'s
    parameters) set."""
    resources = dict(predictor.resources)
    env = dict(predictor.env)
    for parameter in spec.parameters:
        if parameter.name not in params:
            continue
        value = params[parameter.name]
        if parameter.category == "resources":
            resources[parameter.name] = value
        else:
            env[parameter.name] = str(value)
    return PredictorSpec.model_validate(
        {
            **predictor.model_dump(mode="json", by_alias=True, exclude_none=True),
            "resources": resources,
            "env": env,
        }
    )


def tuned_inference(
    inference: InferenceDocument, spec: TuningSpec, params: Mapping[str, Any]
) -> InferenceDocument:
    """``inference`` with its tuned predictor set to ``params`` (module docstring)."""
    chosen = tuned_predictor(inference, spec)
    predictors = [
        with_params(p, spec, params) if p.name == chosen.name else p
        for p in inference.spec.predictors
    ]
    return inference.model_copy(
        update={"spec": inference.spec.model_copy(update={"predictors": predictors})}
    )
