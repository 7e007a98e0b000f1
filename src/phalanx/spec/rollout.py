"""A rollout: moving a predictor's traffic to another model version in steps.

``RolloutSpec`` is what ``phalanx rollout`` sends (``POST /api/v1/inferences/NAME/
rollouts``). While a rollout runs, the service's document holds a *canary* predictor: a
copy of the rolled predictor serving the new version, given ``steps[i]`` percent of the
predictor's traffic share (``split``). The canary is promoted to the next step after
each ``interval`` whose window held at least ``minRequests`` of its requests and stayed
within the thresholds; at the last step (100) the predictor takes the new version
(``promoted``); a window over a threshold, or a canary with no Ready replica for
``readyTimeout``, rolls it back (``rolled_back``).

Guarantees of a validated ``RolloutSpec``: ``steps`` rise strictly, each within 1..100,
and end at 100. The document functions are pure: each returns a new document that
validates as an Inference (the traffic shares still sum to 100).
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Self

from pydantic import Field, model_validator

from phalanx.spec.common import DnsLabel, Duration, SpecModel, located
from phalanx.spec.inference import InferenceDocument, PredictorSpec

#: Most steps of one rollout.
MAX_STEPS: Final = 20
#: The steps when none are given.
DEFAULT_STEPS: Final = (10, 50, 100)
#: ``to`` of this form names a version of the predictor's own model.
_BARE_VERSION: Final = re.compile(r"v[1-9][0-9]*")


class RolloutSpec(SpecModel):
    """A rollout of one predictor of a service to another model version."""

    to: Annotated[str, Field(min_length=1, max_length=160)]
    """The version to roll out: vN (the predictor's own model), NAME:vN, NAME (its
    newest) or NAME:vN@sha256:...; pinned when the rollout starts."""
    predictor: DnsLabel | None = None
    """The predictor to roll; omitted: the service's only predictor."""
    steps: Annotated[list[int], Field(min_length=1, max_length=MAX_STEPS)] = Field(
        default_factory=lambda: list(DEFAULT_STEPS)
    )
    """The new version's share of the predictor's traffic at each step, in percent,
    rising, ending at 100."""
    interval: Duration = 60.0
    """How long each step lasts before it is judged (seconds, or 30s, 5m ...)."""
    max_error_rate: Annotated[float, Field(ge=0, le=1)] = 0.01
    """The most 5xx answers the new version may give in a step's window, as a share of
    its requests (0.01: 1%); above it the rollout rolls back."""
    max_p99: Duration | None = None
    """The highest p99 latency (seconds) the new version may show in a step's window;
    above it the rollout rolls back. Omitted: latency is not judged."""
    min_requests: Annotated[int, Field(ge=1, le=1_000_000)] = 20
    """The fewest requests of the new version a step's window needs before it is judged
    (fewer: the step waits for more)."""
    ready_timeout: Duration = 300.0
    """How long the new version may have no Ready replica (at its start, or later)
    before the rollout rolls back."""

    @model_validator(mode="after")
    def _rising_to_100(self) -> Self:
        for i, step in enumerate(self.steps):
            if not 1 <= step <= 100:
                raise located(
                    f"step {step} is not a share in percent",
                    "give each step within 1..100",
                    at=("steps", i),
                )
            if i and step <= self.steps[i - 1]:
                raise located(
                    f"step {step} does not rise above {self.steps[i - 1]}",
                    "give rising steps, such as 10,50,100",
                    at=("steps", i),
                )
        if self.steps[-1] != 100:
            raise located(
                f"the last step is {self.steps[-1]}, not 100",
                "end the steps with 100 (the new version then takes all the traffic)",
                at=("steps",),
            )
        return self

    def reference(self, model: str) -> str:
        """``to`` as a model reference, ``vN`` read as a version of ``model``."""
        return f"{model}:{self.to}" if _BARE_VERSION.fullmatch(self.to) else self.to


def canary_name(predictor: str) -> str:
    """The name of the predictor that serves the new version while ``predictor`` rolls."""
    return f"{predictor[:56]}-canary"


def canary_share(base: int, share: int) -> int:
    """The canary's traffic (percent of the service's) at ``share`` percent of ``base``."""
    return round(base * share / 100)


def split(
    document: InferenceDocument,
    predictor: str,
    canary: str,
    version: str,
    *,
    base: int,
    share: int,
) -> InferenceDocument:
    """``document`` with ``canary`` (made from ``predictor`` when absent: the same
    runtime and resources serving ``version``, at least one replica) given ``share``
    percent of ``base``, the predictor's share before the rollout, and ``predictor``
    the rest."""
    given = canary_share(base, share)
    predictors: list[PredictorSpec] = []
    found = any(p.name == canary for p in document.spec.predictors)
    for p in document.spec.predictors:
        if p.name == predictor:
            predictors.append(p.model_copy(update={"traffic": base - given}))
            if not found:
                predictors.append(
                    p.model_copy(
                        update={
                            "name": canary,
                            "model_version": version,
                            "traffic": given,
                            "min_replicas": max(1, p.min_replicas),
                            "max_replicas": p.most_replicas,
                        }
                    )
                )
        elif p.name == canary:
            predictors.append(p.model_copy(update={"traffic": given}))
        else:
            predictors.append(p)
    return _with(document, predictors)


def rolled_back(
    document: InferenceDocument, predictor: str, canary: str, *, base: int
) -> InferenceDocument:
    """``document`` without ``canary``, ``predictor`` given ``base`` again."""
    return _with(document, _restored(document, predictor, canary, base, version=None))


def promoted(
    document: InferenceDocument, predictor: str, canary: str, version: str, *, base: int
) -> InferenceDocument:
    """``document`` without ``canary``, ``predictor`` serving ``version`` at ``base``."""
    return _with(document, _restored(document, predictor, canary, base, version=version))


def _restored(
    document: InferenceDocument, predictor: str, canary: str, base: int, *, version: str | None
) -> list[PredictorSpec]:
    kept: list[PredictorSpec] = []
    for p in document.spec.predictors:
        if p.name == canary:
            continue
        if p.name == predictor:
            update: dict[str, object] = {"traffic": base}
            if version is not None:
                update["model_version"] = version
            kept.append(p.model_copy(update=update))
        else:
            kept.append(p)
    return kept


def _with(document: InferenceDocument, predictors: list[PredictorSpec]) -> InferenceDocument:
    """``document`` with ``predictors``, validated again (shares, names, ranges)."""
    spec = document.spec.model_copy(update={"predictors": predictors})
    dumped = document.model_copy(update={"spec": spec}).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return InferenceDocument.model_validate(dumped)
