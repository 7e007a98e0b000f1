"""The ``Pipeline`` document: a graph of steps, each a phalanx Job.

A step is a command (one task of ``resources``), a whole job spec (``job``: several
roles, a gang), or a reference to a named entry of ``components`` (``uses``) whose
fields it may override. Every field a step leaves out is taken from its component,
then from ``defaults``; ``env`` maps are merged (the step's keys win).

Guarantees: a validated ``PipelineDocument`` is a valid graph (``dag.build_graph``
builds it without error): step names are unique across ``steps`` and ``finally``, every
``dependsOn`` and reference names something that exists and may be used there, there is
no cycle, every step has a command or a job and resources for it, a literal foreach list
fits its ``maxItems`` and every template parses. ``phalanx.spec.loader`` reads Pipelines
like the other kinds (``phalanx apply`` registers them); its ``load_pipelines`` refuses
anything else with ``DocumentError`` naming the source, the document, the field and the
fix.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self

import yaml
from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from phalanx.spec.common import (
    API_VERSION,
    DnsLabel,
    EnvName,
    ImageRef,
    JobDuration,
    Metadata,
    Name,
    SpecModel,
    located,
)
from phalanx.spec.job import Command, JobSpec
from phalanx.spec.model import ModelOutput
from phalanx.spec.pipeline.dag import GraphError, build_graph
from phalanx.spec.pipeline.params import Param, type_of
from phalanx.spec.pipeline.parts import (
    CacheSpec,
    ConditionText,
    DatasetNames,
    ForeachSpec,
    Identifier,
    Inputs,
    Outputs,
    ParamEntry,
    ParamSpec,
    RetrySpec,
    ScheduleSpec,
    SubPipelineSpec,
    TemplateText,
)
from phalanx.spec.pipeline.templates import Template, TemplateError
from phalanx.spec.quantity import ResourceMap

#: Most steps of one pipeline (``steps`` and ``finally`` together) and components.
MAX_STEPS: Final = 1_000

_STEP_FIELDS_WITHOUT_JOB: Final = (
    "command",
    "resources",
    "image",
    "env",
    "queue",
    "model",
    "datasets",
)
_STEP_FIELDS_WITHOUT_PIPELINE: Final = (
    *_STEP_FIELDS_WITHOUT_JOB,
    "job",
    "uses",
    "outputs",
    "timeout",
    "cache",
)


def _templates(argv: list[str]) -> list[str]:
    for i, arg in enumerate(argv):
        try:
            Template.parse(arg)
        except TemplateError as error:
            reason = str(error).removesuffix(f"; fix: {error.fix}")
            raise located(reason, error.fix or "", at=(i,)) from None
    return argv


StepCommand = Annotated[Command, AfterValidator(_templates)]


def _at_most_steps(value: Any) -> Any:
    """Refuse more than ``MAX_STEPS`` entries before any is validated."""
    if isinstance(value, dict) and len(value) > MAX_STEPS:
        raise located(
            f"{len(value)} entries is more than the limit of {MAX_STEPS}",
            "split the pipeline, or fan out one step with foreach",
        )
    return value


class StepFields(SpecModel):
    """What a step and a component both hold."""

    command: StepCommand | None = None
    """What the step runs: an argv list, or one shell string (run by /bin/sh -c); templates
    allowed. Omitted: the component's; a step has a command or a job."""
    job: JobSpec | None = None
    """A whole job instead of a command (several roles, a gang); its roles' commands and env
    may use templates. Excludes command, resources, image, env and queue on the step."""
    image: ImageRef | None = None
    """The container image of the step's task; omitted: the component's, then defaults'."""
    env: dict[EnvName, TemplateText] = Field(default_factory=dict)
    """Environment variables (templates allowed), over the component's and defaults'."""
    queue: Name | None = None
    """The leaf queue of the step's job; omitted: the component's, then defaults', then
    default."""
    resources: ResourceMap | None = None
    """What the step's task needs (cpu, memory, gpu ...); omitted: the component's, then
    defaults'."""
    inputs: Inputs | None = None
    """Artifacts and values the step reads; omitted: the component's (none)."""
    outputs: Outputs | None = None
    """Artifacts and values the step produces; omitted: the component's (none)."""
    when: ConditionText | None = None
    """A condition on params and upstream outputs; false: the step is Skipped. Omitted:
    always run."""
    foreach: ForeachSpec | None = None
    """Run the step once per item of a list; omitted: once."""
    retry: RetrySpec | None = None
    """When to run the step's job again; omitted: the component's, then defaults' (no
    retry)."""
    timeout: JobDuration | None = None
    """The longest one attempt may run (e.g. 30m); then it is stopped and fails. Omitted:
    the component's, then defaults' (no limit)."""
    cache: CacheSpec | None = None
    """Whether and how results are reused; omitted: the component's, then defaults'
    (disabled)."""
    model: ModelOutput | None = None
    """A model the step's task writes, registered as the model's next version when the
    step succeeds; omitted: the component's (none). A job step declares it on a role."""
    datasets: DatasetNames | None = None
    """Datasets of the run's user the step's task reads (phalanx get datasets), each
    read-only at $PHALANX_DATA_<NAME>. When the step starts each is pinned to its current
    listing, which is part of the step's cache key: new data, once listed again (phalanx
    dataset refresh NAME), reruns the step. Omitted: the component's (none). A job step
    names them on its roles."""

    @model_validator(mode="after")
    def _job_excludes(self) -> Self:
        if self.job is not None:
            for name in _STEP_FIELDS_WITHOUT_JOB:
                if getattr(self, name):
                    raise located(
                        "is not allowed together with job",
                        f"give {name} in the job (its queue, or each role's {name})",
                        at=(name,),
                    )
            for r, role in enumerate(self.job.roles):
                for d, reference in enumerate(role.datasets):
                    if "@" in reference:
                        raise located(
                            f"{reference[:80]!r} is pinned to a listing",
                            "name the dataset alone: the server pins it to its current "
                            "listing when the step starts, and that listing is part of the "
                            "step's cache key",
                            at=("job", "roles", r, "datasets", d),
                        )
        return self


class ComponentSpec(StepFields):
    """A reusable step: every field of a step but its place in the graph."""


class StepSpec(StepFields):
    """One step: its fields, where it takes them from and what it waits for."""

    uses: DnsLabel | None = None
    """A component of spec.components whose fields this step takes (its own fields win)."""
    pipeline: SubPipelineSpec | None = None
    """Run a registered pipeline as a child run instead of a command or job (a
    sub-pipeline); the step succeeds when that run does."""
    depends_on: Annotated[list[DnsLabel], Field(max_length=MAX_STEPS)] = Field(default_factory=list)
    """Steps that must end first (references {{steps.X...}} add X themselves); a finally
    step may name only normal steps."""

    @model_validator(mode="after")
    def _pipeline_excludes(self) -> Self:
        if self.pipeline is not None:
            for name in _STEP_FIELDS_WITHOUT_PIPELINE:
                if getattr(self, name):
                    raise located(
                        "is not allowed together with pipeline",
                        "a sub-pipeline's steps say what they run; give them that pipeline, "
                        "or run a command or job in this step instead",
                        at=(name,),
                    )
        return self


class Defaults(SpecModel):
    """``defaults``: what every step takes when it and its component leave a field out."""

    queue: Name | None = None
    """The queue of every step's job; omitted: default."""
    resources: ResourceMap | None = None
    """The resources of every step's task."""
    image: ImageRef | None = None
    """The image of every step's task (of every role without one, for job steps)."""
    env: dict[EnvName, TemplateText] = Field(default_factory=dict)
    """Environment variables of every step (of every role, for job steps)."""
    retry: RetrySpec | None = None
    """The retry policy of every step; omitted: one attempt."""
    timeout: JobDuration | None = None
    """The timeout of every step's attempt; omitted: none."""
    cache: CacheSpec | None = None
    """The cache policy of every step; omitted: disabled."""


class PipelineSpec(SpecModel):
    """``spec`` of a Pipeline."""

    params: dict[Identifier, ParamEntry] = Field(default_factory=dict)
    """Parameters by name: a default (its type is the parameter's) or {type, default,
    description}; set per run with -p name=value."""
    defaults: Defaults = Field(default_factory=Defaults)
    """What every step inherits."""
    components: Annotated[dict[DnsLabel, ComponentSpec], BeforeValidator(_at_most_steps)] = Field(
        default_factory=dict
    )
    """Reusable steps by name, for steps' uses."""
    steps: Annotated[dict[DnsLabel, StepSpec], BeforeValidator(_at_most_steps), Field(min_length=1)]
    """The steps by name (DNS labels), run in dependency order."""
    finally_: Annotated[dict[DnsLabel, StepSpec], BeforeValidator(_at_most_steps)] = Field(
        default_factory=dict, alias="finally"
    )
    """Steps run once when every normal step has ended, whatever the outcome (also after a
    stop)."""
    on_failure: Literal["failFast", "continue"] = "failFast"
    """failFast: after a failure no new step starts; continue: steps that do not depend on
    the failed one go on."""
    concurrency: Annotated[int, Field(ge=1)] | None = None
    """The most steps (foreach items count one each) running at once in a run; omitted: no
    limit."""
    schedule: ScheduleSpec | None = None
    """Start runs by the clock; omitted: runs start on request only."""

    @model_validator(mode="after")
    def _scheduled_runs_need_no_params(self) -> Self:
        if self.schedule is not None:
            for param in self.declared_params():
                if param.default is None:
                    raise located(
                        f"param {param.name} has no default, and a run the schedule starts "
                        "gives no params",
                        f"give {param.name} a default, or remove schedule",
                        at=("schedule",),
                    )
        return self

    @model_validator(mode="after")
    def _a_graph(self) -> Self:
        try:
            build_graph(self)
        except GraphError as error:
            raise located(error.reason, error.fix, at=error.at) from None
        return self

    def declared_params(self) -> list[Param]:
        """The parameters, typed (a bare default declares its own type)."""
        return [
            Param(name=name, type=entry.type, default=entry.default)
            if isinstance(entry, ParamSpec)
            else Param(name=name, type=type_of(entry), default=entry)
            for name, entry in self.params.items()
        ]


class PipelineDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Pipeline``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Pipeline"] = "Pipeline"
    """Always Pipeline."""
    metadata: Metadata
    """The pipeline's name, labels and annotations."""
    spec: PipelineSpec
    """The pipeline: params, defaults, components, steps and finally steps."""

    def to_dict(self) -> dict[str, Any]:
        """The document as plain data, field names as documents write them."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_yaml(self) -> str:
        """The document as YAML text that ``load_pipelines`` reads back into an equal one."""
        data = self.to_dict()
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        if yaml.safe_load(text) != data:  # PyYAML writes a few line breaks (U+0085) raw
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=False)
        return text


#: The document's name in Python, as the DSL and the controller call it.
Pipeline = PipelineDocument


__all__ = [
    "ComponentSpec",
    "Defaults",
    "Identifier",
    "Pipeline",
    "PipelineDocument",
    "PipelineSpec",
    "StepSpec",
]
