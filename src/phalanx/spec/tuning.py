"""The ``Tuning`` document: right-sizing an inference service's predictor, or a training
job's role, by measurement (KubeDL-Morphling's ProfilingExperiment).

A Tuning names a predictor of one of its user's inference services, the parameters to
tune and their spaces (resources: cpu, memory, gpu; env: thread counts, batch sizes),
the objective, the load that measures a candidate, the sampler, and how many trials run
in all and at once. Each trial is a real replica of the predictor with exactly the
candidate spec, placed by the engine through the service's queue, warmed up, then loaded
at fixed rates by an open-loop client (``phalanx.tuning.load``); its throughput,
latencies and errors give the objective's value (``phalanx.tuning.objective``). A
training tuning's trial is the job with the candidate set on one role (its env,
resources and replica count), run for ``trialDuration``; the samples/s it reports per
GPU is its value.

Guarantees of a validated ``TuningDocument``: parameter names are unique, each space is
well formed (``low <= high``, values given, a resources parameter is cpu, memory or gpu
with quantities as values or bounds), a grid sampler's space is finite, the objective
has what it needs (``cheapest``: a latency SLO and a rate; ``throughputPerCost``: the
rates to climb), and ``parallel <= trials``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self

from pydantic import Field, model_validator

from phalanx.spec.common import (
    API_VERSION,
    DnsLabel,
    Duration,
    Metadata,
    Name,
    SpecModel,
    UserName,
    located,
)
from phalanx.spec.job import JobSpec
from phalanx.spec.quantity import Quantity

#: Most parameters, candidate values of one, trials of one tuning, trials at once.
MAX_PARAMETERS: Final = 16
MAX_VALUES: Final = 256
MAX_TRIALS: Final = 1_000
MAX_PARALLEL: Final = 16
#: The resources a parameter may tune.
TUNABLE_RESOURCES: Final = ("cpu", "memory", "gpu")


class TuningParameter(SpecModel):
    """One tunable parameter: where it goes in the replica's spec and its space."""

    name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")]
    """For resources: cpu, memory or gpu; for env: the variable (OMP_NUM_THREADS)."""
    category: Literal["resources", "env", "replicas"] = "env"
    """Where the value goes: the replica's (or the tuned role's) resources, its
    environment, or (a training tuning) the role's replica count."""
    type: Literal["int", "float", "discrete", "categorical"] = "discrete"
    """int and float: a range (low, high, optional step, log); discrete: ordered values
    (numbers or quantities); categorical: unordered values."""
    low: Quantity | None = None
    """The range's lower end (int, float), a quantity for resources (500m, 1Gi)."""
    high: Quantity | None = None
    """The range's upper end."""
    step: Quantity | None = None
    """The range's step (a grid sampler needs one for int and float)."""
    log: bool = False
    """Sample the range on a log scale."""
    values: Annotated[list[Quantity | str], Field(max_length=MAX_VALUES)] = Field(
        default_factory=list
    )
    """The candidate values (discrete, categorical)."""

    @model_validator(mode="after")
    def _space(self) -> Self:
        if self.category == "resources" and self.name not in TUNABLE_RESOURCES:
            raise located(
                f"{self.name!r} is not a resource a tuning sets",
                "tune one of " + ", ".join(TUNABLE_RESOURCES) + ", or give category: env",
                at=("name",),
            )
        if self.category == "replicas" and self.type not in ("int", "discrete"):
            raise located(
                "a replica count is a whole number",
                "give type: int (low, high) or discrete values",
                at=("type",),
            )
        ranged = self.type in ("int", "float")
        if ranged and (self.low is None or self.high is None):
            raise located(
                f"a{'n' if self.type == 'int' else ''} {self.type} parameter needs low and high",
                "give low and high (and step for a grid), or type: discrete with values",
                at=("low" if self.low is None else "high",),
            )
        if not ranged and not self.values:
            raise located(
                f"a {self.type} parameter needs values",
                "list the candidate values, or give type: int with low and high",
                at=("values",),
            )
        return self


class TuningObjective(SpecModel):
    """What makes one spec better than another."""

    goal: Literal["cheapest", "throughputPerCost", "samplesPerGpu"] = "cheapest"
    """cheapest: the lowest cost whose p99 latency at ``rate`` stays under ``latencyP99``
    (and errors under ``maxErrorRate``); throughputPerCost: the most requests/s per unit
    of cost, the requests/s being the highest of ``rates`` met within the SLO (when one
    is given); samplesPerGpu (a training tuning): the most samples/s per GPU the job
    reports (phalanx.client.progress) by the end of ``trialDuration``."""
    latency_p99: Duration | None = None
    """The SLO on the 99th percentile latency (250ms, 1s)."""
    rate: Annotated[float, Field(gt=0, le=100_000)] | None = None
    """The requests/s the spec must carry (cheapest)."""
    rates: Annotated[list[Annotated[float, Field(gt=0, le=100_000)]], Field(max_length=32)] = Field(
        default_factory=list
    )
    """The requests/s to climb, lowest first (throughputPerCost)."""
    max_error_rate: Annotated[float, Field(ge=0, lt=1)] = 0.01
    """The largest share of failed requests a spec may have."""

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.goal == "cheapest" and (self.latency_p99 is None or self.rate is None):
            raise located(
                "the cheapest goal needs a latency SLO and a rate",
                "give latencyP99 (250ms) and rate (requests/s)",
                at=("latencyP99" if self.latency_p99 is None else "rate",),
            )
        if self.goal == "samplesPerGpu" and (self.rate is not None or self.rates):
            raise located(
                "a training tuning's objective is measured by the job's own reports",
                "omit rate and rates (the job reports samples/s: phalanx.client.progress)",
                at=("rate" if self.rate is not None else "rates",),
            )
        if self.goal == "throughputPerCost" and not self.rates:
            raise located(
                "the throughputPerCost goal needs the rates to climb",
                "give rates: [10, 20, 40, 80] (requests/s, lowest first)",
                at=("rates",),
            )
        if self.rates != sorted(self.rates):
            raise located("rates are not lowest first", "sort them", at=("rates",))
        return self


class TuningLoad(SpecModel):
    """The request a trial's client sends, and for how long."""

    path: Annotated[str, Field(pattern=r"^/[!-~]*$", max_length=1024)] | None = None
    """The replica's path (default for the torchscript runtime: /v1/models/MODEL:predict)."""
    body: dict[str, Any] = Field(default_factory=dict)
    """The JSON body of every request (e.g. {instances: [[...]]})."""
    warmup: Duration = 5.0
    """How long the replica is loaded before it is measured."""
    duration: Duration = 20.0
    """How long each rate is measured."""


class TuningSpec(SpecModel):
    """``spec`` of a Tuning."""

    user: UserName = "default"
    """Whose tuning it is (the API sets it to the caller); its trials are that user's."""
    inference: Name | None = None
    """The inference service whose predictor is tuned (the user's own); or ``job``."""
    predictor: DnsLabel | None = None
    """The predictor to tune; omitted: the service's first."""
    job: JobSpec | None = None
    """A training job to tune instead of a service (its queue, roles ...): each trial is
    this job with the candidate set on ``role``, run for ``trialDuration`` while it
    reports its samples/s (phalanx.client.progress), then stopped."""
    role: DnsLabel | None = None
    """The job's role the parameters set; omitted: its first."""
    trial_duration: Duration = 60.0
    """How long a training trial runs from its first progress report; its last report
    then counts."""
    parameters: Annotated[list[TuningParameter], Field(min_length=1, max_length=MAX_PARAMETERS)]
    """The parameters and their spaces."""
    objective: TuningObjective
    """What the trials are scored by."""
    load: TuningLoad = Field(default_factory=TuningLoad)
    """The request a trial is measured with."""
    sampler: Literal["tpe", "gp", "random", "grid", "cost"] = "tpe"
    """How candidates are chosen: optuna's TPE (default), its Gaussian process sampler,
    random search, every point of the grid, or (the cheapest goal) cost: the grid's
    points cheapest first, ending at the first that holds the SLO (all the others cost
    more)."""
    seed: int | None = None
    """The sampler's seed (the same seed proposes the same candidates)."""
    trials: Annotated[int, Field(ge=1, le=MAX_TRIALS)] = 20
    """How many trials in all (a grid: at most its size)."""
    parallel: Annotated[int, Field(ge=1, le=MAX_PARALLEL)] = 1
    """How many trials run at once, each on a node of its own."""
    placement_timeout: Duration = 300.0
    """How long a trial's replica may wait to be placed; then the trial is unplaceable."""

    @model_validator(mode="after")
    def _target(self) -> Self:
        training = self.job is not None
        if training == (self.inference is not None):
            raise located(
                "a tuning tunes an inference service or a training job"
                + (", not both" if training else ": it names neither"),
                "give inference (a service's name) or job (a job's spec)",
                at=("job" if training else "inference",),
            )
        if training != (self.objective.goal == "samplesPerGpu"):
            raise located(
                f"the {self.objective.goal} goal is not for a "
                + ("training job" if training else "service"),
                "a job is tuned for samplesPerGpu; a service for cheapest or throughputPerCost",
                at=("objective", "goal"),
            )
        roles = [] if self.job is None else [role.name for role in self.job.roles]
        if self.role is not None and self.role not in roles:
            raise located(
                f"the job has no role {self.role!r}",
                "name one of " + ", ".join(roles) + ", or omit role (the first)",
                at=("role",),
            )
        for i, parameter in enumerate(self.parameters):
            if (parameter.category == "replicas") != (training and parameter.name == "replicas"):
                raise located(
                    f"parameter {parameter.name!r} in category {parameter.category}: only a "
                    "training tuning's parameter named replicas sets a replica count",
                    "name it replicas with category: replicas (a job), or use resources or env",
                    at=("parameters", i),
                )
        return self

    @model_validator(mode="after")
    def _checked(self) -> Self:
        names = [parameter.name for parameter in self.parameters]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise located(
                    f"parameter {name!r} is given twice", "name each once", at=("parameters", i)
                )
        if self.parallel > self.trials:
            raise located(
                f"parallel {self.parallel} is above trials {self.trials}",
                "give parallel <= trials",
                at=("parallel",),
            )
        if self.sampler == "cost" and self.objective.goal != "cheapest":
            raise located(
                "the cost sampler is for the cheapest goal (a spec's value is its cost)",
                "use tpe, gp, random or grid",
                at=("sampler",),
            )
        if self.sampler in ("grid", "cost"):
            for i, parameter in enumerate(self.parameters):
                if parameter.type in ("int", "float") and parameter.step is None:
                    raise located(
                        f"the {self.sampler} sampler needs a step for {parameter.type} parameter "
                        f"{parameter.name!r}",
                        "give step, or list the values (type: discrete)",
                        at=("parameters", i, "step"),
                    )
        return self


class TuningDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Tuning``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Tuning"] = "Tuning"
    """Always Tuning."""
    metadata: Metadata
    """The tuning's name (unique among its user's tunings)."""
    spec: TuningSpec
    """What is tuned, how it is measured and searched."""
