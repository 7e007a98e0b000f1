"""The parts of a step: inputs, outputs, fan-out, retry, cache, and the document's names.

Each is a strict ``SpecModel`` (camelCase, unknown fields refused with the closest
name). Templates in them are parsed when the document is validated; what they refer
to is checked by ``phalanx.spec.pipeline.dag`` once the whole pipeline is known.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Final, Literal, Self, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    model_validator,
)
from pydantic_core import PydanticCustomError

from phalanx.domain.job import data_variable
from phalanx.spec.common import UNION_TAG, Duration, Loc, SpecModel, located
from phalanx.spec.job import DATASET_REFERENCE, MAX_DATASETS
from phalanx.spec.limits import MAX_NAME
from phalanx.spec.pipeline.conditions import Condition, ConditionError
from phalanx.spec.pipeline.cron import CronError, CronSchedule
from phalanx.spec.pipeline.params import MAX_LIST, MAX_STRING, ParamType, ParamValue, a, check_value
from phalanx.spec.pipeline.templates import Template, TemplateError, Value

#: Most items one foreach may fan out to (``maxItems`` is at most this).
MAX_FANOUT: Final = 10_000
#: Most extra files one cache key may hash.
MAX_CACHE_FILES: Final = 1_000
#: Most attempts of a step (the first and its retries).
MAX_ATTEMPTS: Final = 100

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _identifier(value: str) -> str:
    if not _IDENTIFIER.fullmatch(value):
        raise located(
            f"{value[:60]!r} is not a valid name here",
            "use letters, digits and '_', starting with a letter or '_', at most 63 characters "
            "(templates refer to it as params.NAME, inputs.NAME, outputs.NAME)",
        )
    return value


def _template(value: str) -> str:
    try:
        Template.parse(value)
    except TemplateError as error:
        raise located(str(error).removesuffix(f"; fix: {error.fix}"), error.fix or "") from None
    return value


def _condition(value: str) -> str:
    try:
        Condition.parse(value)
    except (ConditionError, TemplateError) as error:
        raise located(str(error).removesuffix(f"; fix: {error.fix}"), error.fix or "") from None
    return value


def _cron(value: str) -> str:
    try:
        CronSchedule.parse(value)
    except CronError as error:
        raise located(str(error).removesuffix(f"; fix: {error.fix}"), error.fix or "") from None
    return value


def _dataset_names(value: list[str]) -> list[str]:
    """Each entry is a dataset's bare name (the server pins it when the step starts), and
    no two are one task variable (``$PHALANX_DATA_<NAME>``)."""
    seen: dict[str, str] = {}
    for i, name in enumerate(value):
        if "@" in name:
            raise located(
                f"{name[:80]!r} is pinned to a listing",
                "name the dataset alone: the server pins it to its current listing when the "
                "step starts, and that listing is part of the step's cache key",
                at=(i,),
            )
        if not DATASET_REFERENCE.fullmatch(name) or len(name) > MAX_NAME:
            raise located(
                f"{name[:80]!r} is not a dataset name",
                "give the name of a dataset of the run's user (phalanx get datasets)",
                at=(i,),
            )
        variable = data_variable(name)
        if variable in seen:
            other = seen[variable]
            said = "is named twice" if other == name else f"and {other!r} would both be ${variable}"
            raise located(f"dataset {name!r} {said}", "name each dataset once", at=(i,))
        seen[variable] = name
    return value


#: The datasets a step reads, by name (at most ``MAX_DATASETS``).
DatasetNames = Annotated[
    list[Annotated[str, Field(max_length=4 * MAX_NAME)]],
    Field(max_length=MAX_DATASETS),
    AfterValidator(_dataset_names),
]
#: A name templates refer to: a param, an input or an output (``[A-Za-z_][A-Za-z0-9_]*``).
Identifier = Annotated[str, AfterValidator(_identifier)]
#: Text with ``{{...}}`` references (see ``phalanx.spec.pipeline.templates``).
TemplateText = Annotated[str, AfterValidator(_template)]
#: A ``when`` condition (see ``phalanx.spec.pipeline.conditions``).
ConditionText = Annotated[str, AfterValidator(_condition)]


def _bounded_list(value: Any) -> Any:
    """Refuse an oversized list before its items are validated one by one."""
    if isinstance(value, list) and len(value) > MAX_LIST:
        raise located(
            f"{len(value)} items is more than the limit of {MAX_LIST}",
            "split the work, or read the items from a file in a step",
        )
    return value


def _scalar(value: Any, at: Loc = ()) -> Scalar:
    if isinstance(value, str | int | float) and not (
        isinstance(value, float) and not math.isfinite(value)
    ):
        if isinstance(value, str) and len(value) > MAX_STRING:
            raise located(f"{len(value)} characters is over {MAX_STRING}", "shorten it", at=at)
        return value
    raise located(
        f"expected a string, number or boolean, got {_yaml_type(value)}",
        "write a scalar (quote text YAML would read otherwise)",
        at=at,
    )


def _yaml_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return str(value)  # not finite
    if isinstance(value, dict | list):
        return "a mapping" if isinstance(value, dict) else "a list"
    return type(value).__name__


def _param_value(value: Any) -> ParamValue:
    if isinstance(_bounded_list(value), list):
        return [_scalar(item, (i,)) for i, item in enumerate(value)]
    return _scalar(value)


def _item(value: Any) -> Item:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str) or not _IDENTIFIER.fullmatch(key):
                raise located(
                    f"{str(key)[:40]!r} is not a valid item key",
                    "use letters, digits and '_' ({{item.KEY}} refers to it)",
                    at=(str(key),),
                )
        return {key: _scalar(item, (key,)) for key, item in value.items()}
    return _scalar(value)


def _items(value: Any) -> list[Item]:
    if not isinstance(_bounded_list(value), list):
        raise located("expected a list", "write a list, or one reference such as {{params.x}}")
    return [_item_at(item, i) for i, item in enumerate(value)]


def _item_at(value: Any, index: int) -> Item:
    try:
        return _item(value)
    except PydanticCustomError as error:
        context = error.context or {}
        raise located(
            context.get("detail", str(error)).removesuffix(f"; fix: {context.get('fix')}"),
            str(context.get("fix", "")),
            at=(index, *context.get("at", ())),
        ) from None


Scalar: TypeAlias = str | int | float | bool
#: A parameter's value: a scalar or a list of scalars.
ParamValueField = Annotated[
    ParamValue, PlainValidator(_param_value, json_schema_input_type=ParamValue)
]
#: An item of a literal foreach list: a scalar, or a mapping of scalars (``{{item.key}}``).
Item: TypeAlias = Scalar | dict[str, Scalar]


def _form(value: Any) -> str:
    return f"{UNION_TAG}{'full' if isinstance(value, dict | BaseModel) else 'value'}"


def _items_form(value: Any) -> str:
    return f"{UNION_TAG}{'ref' if isinstance(value, str) else 'list'}"


def _as_value(value: ParamValue) -> Value:
    return list(value) if isinstance(value, list) else value


class ParamSpec(SpecModel):
    """A parameter declared in full: ``{type: float, default: 0.01, description: ...}``."""

    type: ParamType
    """string, int, float, bool or list."""
    default: ParamValueField | None = None
    """The value taken when the run does not set it; omitted: the run must set it."""
    description: Annotated[str, Field(max_length=4096)] = ""
    """What the parameter means, for people."""

    @model_validator(mode="after")
    def _default_has_the_type(self) -> Self:
        if self.default is not None and check_value(_as_value(self.default), self.type) is None:
            raise located(
                f"{json.dumps(self.default)[:40]} is not {a(self.type)}",
                f"give a default of type {self.type}, or change the type",
                at=("default",),
            )
        return self


#: A parameter: its default (whose type it takes), or a ``ParamSpec``.
ParamEntry: TypeAlias = Annotated[
    Annotated[ParamValueField, Tag(f"{UNION_TAG}value")]
    | Annotated[ParamSpec, Tag(f"{UNION_TAG}full")],
    Discriminator(_form),
]


class Inputs(SpecModel):
    """``inputs``: what the step reads, as ``{{inputs.NAME}}`` in its templates."""

    artifacts: dict[Identifier, TemplateText] = Field(default_factory=dict)
    """Artifacts by name: an upstream output ({{steps.prep.outputs.data}}) or a path or fsspec
    URL (may use {{params.x}}); {{inputs.NAME}} is its path."""
    params: dict[Identifier, TemplateText] = Field(default_factory=dict)
    """Values by name, rendered from templates (e.g. {{steps.eval.outputs.accuracy}});
    {{inputs.NAME}} is the value."""

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        for name in self.params:
            if name in self.artifacts:
                raise located(
                    f"{name!r} is both an input artifact and an input param",
                    "rename one of them",
                    at=("params", name),
                )
        return self


class OutputParam(SpecModel):
    """An output value: the step writes JSON to the path ``{{outputs.NAME}}`` (or into an
    output artifact, ``fromArtifact``); phalanx reads it when the step succeeds."""

    type: Literal["string", "int", "float", "bool", "list", "json"] = "json"
    """The value's type, checked when it is read; json: any JSON value."""
    from_artifact: Identifier | None = None
    """Read the value from this output artifact (a JSON file) instead of its own file."""
    key: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")] | None = None
    """A dotted path into the JSON document (metrics.accuracy); omitted: the whole document."""


class Outputs(SpecModel):
    """``outputs``: what the step produces, as ``{{outputs.NAME}}`` (a path the engine
    generates under the run's workspace) and ``{{steps.STEP.outputs.NAME}}`` downstream."""

    artifacts: Annotated[list[Identifier], Field(max_length=256)] = Field(default_factory=list)
    """Names of the files or directories the step writes, each at {{outputs.NAME}}."""
    params: dict[Identifier, OutputParam] = Field(default_factory=dict)
    """Output values by name, read as JSON when the step succeeds."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        seen: set[str] = set()
        for i, name in enumerate(self.artifacts):
            if name in seen:
                raise located(f"{name!r} is listed twice", "list it once", at=("artifacts", i))
            seen.add(name)
        for name, param in self.params.items():
            if name in seen:
                raise located(
                    f"{name!r} is both an output artifact and an output param",
                    "rename one of them",
                    at=("params", name),
                )
            source = param.from_artifact
            if source is not None and source not in self.artifacts:
                raise located(
                    f"{source!r} is not an output artifact of this step",
                    f"name one of {self.artifacts}" if self.artifacts else "add it to artifacts",
                    at=("params", name, "fromArtifact"),
                )
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """Every output name, artifacts then params."""
        return (*self.artifacts, *self.params)


class ForeachSpec(SpecModel):
    """``foreach``: run the step once per item, ``{{item}}`` in its templates."""

    items: Annotated[
        Annotated[
            list[Item],
            PlainValidator(_items, json_schema_input_type=list[Item]),
            Tag(f"{UNION_TAG}list"),
        ]
        | Annotated[TemplateText, Tag(f"{UNION_TAG}ref")],
        Discriminator(_items_form),
    ]
    """A list of scalars or mappings, or one reference to a list: {{params.x}} or
    {{steps.s.outputs.x}}."""
    max_items: Annotated[int, Field(ge=1, le=MAX_FANOUT)]
    """Required: the most items accepted; a longer list fails the step (or the document,
    when literal). At most 10000."""
    max_parallel: Annotated[int, Field(ge=1)] | None = None
    """The most items running at once; omitted: no limit of its own."""

    @model_validator(mode="after")
    def _fits(self) -> Self:
        if isinstance(self.items, list) and len(self.items) > self.max_items:
            raise located(
                f"{len(self.items)} items is more than maxItems ({self.max_items})",
                f"raise maxItems (at most {MAX_FANOUT}) or give fewer items",
                at=("items",),
            )
        if isinstance(self.items, str) and Template.parse(self.items).single is None:
            raise located(
                "is neither a list nor one reference",
                "write a list, or exactly one reference such as {{steps.split.outputs.shards}}",
                at=("items",),
            )
        return self


class BackoffSpec(SpecModel):
    """The wait before a retry: ``initial``, times ``factor`` each further retry, at most
    ``max``."""

    initial: Duration = 10.0
    """Wait before the first retry (90, 30s, 5m)."""
    factor: Annotated[float, Field(ge=1.0, le=10.0)] = 2.0
    """What the wait is multiplied by at each further retry."""
    max: Duration = 300.0
    """The longest wait."""


FailureCause: TypeAlias = Literal["preempted", "nodeLost", "failed"]
_RETRIED: Final[tuple[FailureCause, ...]] = ("preempted", "nodeLost")


class RetrySpec(SpecModel):
    """``retry``: when and how often a step's job is run again."""

    max_attempts: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS)] = 3
    """Attempts in all, the first included (1: no retry)."""
    on: list[FailureCause] = Field(default_factory=lambda: list(_RETRIED))
    """Which endings are retried: preempted (evicted by preemption or reclaim), nodeLost,
    failed (non-zero exit, timeout). An ending not listed fails the step at once."""
    backoff: BackoffSpec = Field(default_factory=BackoffSpec)
    """The wait between attempts."""

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        """YAML 1.1 reads a bare ``on:`` key as ``true``: take it for ``on`` (also as the
        text ``"true"``, which it becomes when the document is sent as JSON)."""
        if isinstance(data, dict) and "on" not in data:
            for read in (True, "true"):
                if read in data:
                    return {("on" if key == read else key): value for key, value in data.items()}
        return data

    def delay(self, attempt: int, cause: FailureCause) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt``
        (1-based) ended by ``cause``; None: no retry, the step fails."""
        if cause not in self.on or attempt >= self.max_attempts:
            return None
        return float(
            min(self.backoff.max, self.backoff.initial * self.backoff.factor ** (attempt - 1))
        )


class CacheSpec(SpecModel):
    """``cache``: reuse the outputs of an earlier successful run of the same step with the
    same key (see ``phalanx.workflow.cache``)."""

    enabled: bool = False
    """Whether the step's results are cached and reused."""
    ttl: Duration | None = None
    """How long an entry is served (1d, 12h); omitted: until evicted."""
    files: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=4096)]],
        Field(max_length=MAX_CACHE_FILES),
    ] = Field(default_factory=list)
    """Extra files (paths or fsspec URLs, e.g. the step's script) whose content is hashed
    into the key."""
    exclude_params: list[Identifier] = Field(default_factory=list)
    """Parameters left out of the key (a log level, say): changing them still hits."""
    version: Annotated[str, Field(max_length=256)] = ""
    """Part of the key: change it to make every earlier entry of the step a miss."""


class SubPipelineSpec(SpecModel):
    """``pipeline``: the step runs a registered pipeline as a run of its own (a child run),
    and ends as that run ends."""

    name: Annotated[str, Field(min_length=1, max_length=253)]
    """The registered pipeline to run."""
    params: dict[Identifier, TemplateText] = Field(default_factory=dict)
    """Its params (templates allowed: {{params.x}}, {{steps.s.outputs.y}}, {{item}}); the
    others take their defaults."""


class ScheduleSpec(SpecModel):
    """``schedule``: start a run by the clock."""

    cron: Annotated[str, AfterValidator(_cron)]
    """Five-field cron expression in UTC (0 3 * * mon-fri, */15 * * * *) or @daily, @hourly
    ..."""
    concurrency_policy: Literal["allow", "skip", "replace"] = "allow"
    """When a run of the schedule is still going: allow another, skip this one, or replace it
    (cancel the running one)."""
