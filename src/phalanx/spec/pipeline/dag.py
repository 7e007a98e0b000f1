"""The validated graph of a pipeline: resolved steps, their dependencies and order.

``build_graph`` resolves every step (its own fields, then its component's, then the
pipeline's ``defaults``), gathers its dependencies (``dependsOn`` and every step named by
a ``{{steps.X.outputs.Y}}`` reference) and checks the whole. It guarantees, or raises
``GraphError`` naming the place (``steps.NAME.FIELD``), what is wrong and the fix:

- step names are unique across ``steps`` and ``finally``; ``uses`` names a component;
- every step has a command or a job, and a command step has resources;
- a step names ``datasets`` only beside a command (a job step names them on its roles);
- every ``dependsOn`` names another step; a normal step depends on normal steps only, a
  ``finally`` step on normal steps only (finally steps start when every normal step has
  ended, so their order among themselves is not expressible);
- every reference resolves statically: ``params.x`` is declared, ``inputs.x`` /
  ``outputs.x`` are the step's own (and not used inside ``inputs``, ``when`` or
  ``foreach``), ``steps.S.outputs.x`` is an output of another step S, ``item`` only in a
  foreach step (``item.key``: a key of every literal item); ``cache.excludeParams`` are
  declared params;
- there is no cycle (the error lists it: ``a -> b -> a``);
- ``order`` is a topological order, the earliest declared ready step first
  (deterministic).
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeVar

from phalanx.domain.errors import InvalidInput
from phalanx.spec.common import Loc
from phalanx.spec.job import JobSpec
from phalanx.spec.model import ModelOutput
from phalanx.spec.pipeline.conditions import Condition
from phalanx.spec.pipeline.params import Param, type_of
from phalanx.spec.pipeline.parts import (
    CacheSpec,
    ForeachSpec,
    Inputs,
    Outputs,
    ParamSpec,
    RetrySpec,
    SubPipelineSpec,
)
from phalanx.spec.pipeline.templates import Kind, Reference, Template, TemplateError
from phalanx.spec.quantity import QuantityValue

if TYPE_CHECKING:
    from phalanx.spec.pipeline.document import (
        ComponentSpec,
        Defaults,
        PipelineSpec,
        StepFields,
        StepSpec,
    )

T = TypeVar("T")


class GraphError(InvalidInput):
    """A pipeline whose steps do not form a valid graph: ``at`` (a place under ``spec``),
    the ``reason`` and the ``fix``."""

    fix: str

    def __init__(self, reason: str, fix: str, *, at: Loc) -> None:
        super().__init__(reason, field=".".join(map(str, at)), fix=fix)
        self.reason, self.at = reason, at


@dataclass(frozen=True, slots=True, kw_only=True)
class StepNode:
    """One resolved step: every field with its component's and the defaults' applied.

    ``command``, ``job`` and ``pipeline`` are unrendered (templates); exactly one is set. ``depends_on``
    holds explicit and implied dependencies, in graph order.
    """

    name: str
    final: bool  # a finally step
    depends_on: tuple[str, ...]
    command: tuple[str, ...] | None
    job: JobSpec | None
    pipeline: SubPipelineSpec | None  # a sub-pipeline step: a child run, no job
    image: str | None
    env: Mapping[str, str]
    queue: str
    resources: Mapping[str, QuantityValue] | None
    inputs: Inputs
    outputs: Outputs
    when: Condition | None
    foreach: ForeachSpec | None
    retry: RetrySpec
    timeout: float | None
    cache: CacheSpec
    model: ModelOutput | None  # the model a command step's task writes
    #: the datasets its job reads, by name, in order: a command step's own (or its
    #: component's), a job step's roles' (each once)
    datasets: tuple[str, ...]
    params_used: frozenset[str]  # parameters any of its templates reads
    #: every template and its place in the step (``("command", 2)``, ``("env", "X")``)
    templates: tuple[tuple[Loc, str], ...] = field(repr=False)

    @property
    def items_reference(self) -> Reference | None:
        """The reference foreach items come from, when not a literal list."""
        if self.foreach is None or isinstance(self.foreach.items, list):
            return None
        return Template.parse(self.foreach.items).single


@dataclass(frozen=True, slots=True, kw_only=True)
class Graph:
    """The steps of a pipeline, resolved, in topological order."""

    steps: Mapping[str, StepNode]  # normal steps, in ``order``
    final: Mapping[str, StepNode]  # finally steps, in declaration order
    order: tuple[str, ...]
    params: tuple[Param, ...]
    on_failure: Literal["failFast", "continue"]
    concurrency: int | None

    def node(self, name: str) -> StepNode:
        """The step ``name``, normal or finally."""
        return self.steps[name] if name in self.steps else self.final[name]

    def downstream(self, name: str) -> frozenset[str]:
        """Every normal step that depends on ``name``, directly or not."""
        found: set[str] = set()
        for step in self.order:
            if any(dep == name or dep in found for dep in self.steps[step].depends_on):
                found.add(step)
        return frozenset(found)


def _close(word: str, names: list[str]) -> str:
    match = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    hint = f"did you mean {match[0]!r}? " if match else ""
    return f"{hint}known: {', '.join(names[:30]) or 'none'}"


def build_graph(spec: PipelineSpec) -> Graph:
    """The graph of ``spec``; raises ``GraphError`` (see the module docstring)."""
    params = tuple(
        Param(name=n, type=e.type, default=e.default)
        if isinstance(e, ParamSpec)
        else Param(name=n, type=type_of(e), default=e)
        for n, e in spec.params.items()
    )
    for name in spec.finally_:
        if name in spec.steps:
            raise GraphError(
                f"{name!r} is both a step and a finally step",
                "give them different names",
                at=("finally", name),
            )
    known_outputs = {
        name: _resolve_outputs(spec, step)
        for name, step in [*spec.steps.items(), *spec.finally_.items()]
    }
    nodes = {
        name: _node(spec, name, step, final, known_outputs, params)
        for final, table in ((False, spec.steps), (True, spec.finally_))
        for name, step in table.items()
    }
    order = _topological(spec, nodes)
    steps = {name: nodes[name] for name in order}
    final = {name: nodes[name] for name in spec.finally_}
    return Graph(
        steps=steps,
        final=final,
        order=order,
        params=params,
        on_failure=spec.on_failure,
        concurrency=spec.concurrency,
    )


def _resolve_outputs(spec: PipelineSpec, step: StepSpec) -> Outputs:
    component = spec.components.get(step.uses) if step.uses else None
    return step.outputs or (component.outputs if component else None) or Outputs()


def _node(
    spec: PipelineSpec,
    name: str,
    step: StepSpec,
    final: bool,
    outputs: Mapping[str, Outputs],
    params: tuple[Param, ...],
) -> StepNode:
    """The step resolved (``_resolved``), then checked: its references, its ``dependsOn``,
    its ``cache.excludeParams``, in that order (the first problem raises ``GraphError``)."""
    at: Loc = ("finally" if final else "steps", name)
    node = _resolved(spec, name, step, final, outputs[name], at)
    node = replace(node, templates=tuple(_templates_of(node)))
    implied, used = _check_references(spec, step, node, at, outputs, params)
    explicit = _check_depends_on(spec, name, step, final)
    depends = tuple(dict.fromkeys([*explicit, *implied]))
    _check_excluded_params(node, params, at)
    return replace(node, depends_on=depends, params_used=frozenset(used))


def _resolved(
    spec: PipelineSpec, name: str, step: StepSpec, final: bool, outputs: Outputs, at: Loc
) -> StepNode:
    """The step with every field resolved (its own, else its component's, else the
    defaults', as far as the field has them) but no dependencies, parameters used or
    templates yet. Raises ``GraphError`` when ``uses`` names no component, the step runs
    nothing, a command step has no resources (checked in that order) or ``when`` is not a
    condition."""
    component = _component(spec, step, at)
    source = _source(step, component, at)
    resources = _resources(step, component, spec.defaults, source, at)
    c, d = component, spec.defaults
    when = _first(step.when, c.when if c else None)
    image, env, timeout, cache = _run_settings(step, c, d, runs=source is not None)
    return StepNode(
        name=name,
        final=final,
        depends_on=(),
        command=None if source is None or source.command is None else tuple(source.command),
        job=None if source is None else source.job,
        pipeline=step.pipeline,
        image=image,
        env=env,
        queue=_queue(step, c, d, source),
        resources=resources,
        inputs=_first(step.inputs, c.inputs if c else None) or Inputs(),
        outputs=outputs,
        when=None if when is None else Condition.parse(when),
        foreach=_first(step.foreach, c.foreach if c else None),
        retry=_first(step.retry, c.retry if c else None, d.retry) or RetrySpec(),
        timeout=timeout,
        cache=cache or CacheSpec(),
        model=None if source is None else _first(step.model, c.model if c else None),
        datasets=_datasets(step, c, source, at),
        params_used=frozenset(),
        templates=(),
    )


def _component(spec: PipelineSpec, step: StepSpec, at: Loc) -> ComponentSpec | None:
    """The component the step uses; None when it uses none. Raises ``GraphError`` at
    ``uses`` when that names no component."""
    if step.uses is None:
        return None
    component = spec.components.get(step.uses)
    if component is None:
        raise GraphError(
            f"{step.uses!r} is not a component",
            _close(step.uses, list(spec.components)),
            at=(*at, "uses"),
        )
    return component


def _source(step: StepSpec, component: ComponentSpec | None, at: Loc) -> StepFields | None:
    """Where the step's command or job is written: the step when it gives one, else its
    component. None only for a sub-pipeline step (which cannot use a component); raises
    ``GraphError`` when any other step has neither a command nor a job."""
    source = step if step.command is not None or step.job is not None else component
    if step.pipeline is None and (
        source is None or (source.command is None and source.job is None)
    ):
        raise GraphError(
            "has neither command nor job", "give a command (or a job, or a pipeline)", at=at
        )
    return source


def _resources(
    step: StepSpec,
    component: ComponentSpec | None,
    defaults: Defaults,
    source: StepFields | None,
    at: Loc,
) -> Mapping[str, QuantityValue] | None:
    """What a command step's task needs: the step's resources, else its component's, else
    the defaults'; None for a job (its roles say) or a sub-pipeline step. Raises
    ``GraphError`` when a command step has none."""
    c = component
    resources = _first(step.resources, c.resources if c else None, defaults.resources)
    if source is not None and source.job is None and resources is None:
        raise GraphError(
            "has no resources", "give resources on the step, its component or in defaults", at=at
        )
    return None if source is None or source.job else resources


def _datasets(
    step: StepSpec, component: ComponentSpec | None, source: StepFields | None, at: Loc
) -> tuple[str, ...]:
    """The datasets the step's job reads: a job's roles' (each once, in order); a
    command step's own, else its component's; none for a sub-pipeline step. Raises
    ``GraphError`` when a step names datasets beside its component's job."""
    if source is None:
        return ()
    if source.job is not None:
        if step.datasets and source is not step:
            raise GraphError(
                f"is not allowed with a job (component {step.uses}'s)",
                "name the datasets on the job's roles in the component",
                at=(*at, "datasets"),
            )
        return tuple(
            dict.fromkeys(
                reference.partition("@")[0]
                for role in source.job.roles
                for reference in role.datasets
            )
        )
    c = component
    return tuple(_first(step.datasets, c.datasets if c else None) or ())


def _queue(
    step: StepSpec, component: ComponentSpec | None, defaults: Defaults, source: StepFields | None
) -> str:
    """The queue of the step's job: a job's own queue when it names one, else the
    defaults'; for a command, the step's, else its component's, else the defaults'; for a
    sub-pipeline step the defaults' (its child run's steps have their queues). "default"
    when none of those names one."""
    if source is None:
        return defaults.queue or "default"
    if source.job is not None:
        if "queue" in source.job.model_fields_set:
            return source.job.queue
        return defaults.queue or "default"
    c = component
    return _first(step.queue, c.queue if c else None, defaults.queue) or "default"


def _run_settings(
    step: StepSpec, component: ComponentSpec | None, defaults: Defaults, *, runs: bool
) -> tuple[str | None, dict[str, str], float | None, CacheSpec | None]:
    """The image, env, timeout and cache of a step that ``runs`` a command or job: each
    the step's, else its component's, else the defaults' (env: all three merged, the
    step's entries winning, then the component's). None and empty for a sub-pipeline step:
    a child run's own steps have their images, env, timeouts and caches."""
    if not runs:
        return None, {}, None, None
    c = component
    return (
        _first(step.image, c.image if c else None, defaults.image),
        {**defaults.env, **(c.env if c else {}), **step.env},
        _first(step.timeout, c.timeout if c else None, defaults.timeout),
        _first(step.cache, c.cache if c else None, defaults.cache),
    )


def _check_excluded_params(node: StepNode, params: tuple[Param, ...], at: Loc) -> None:
    """Every ``cache.excludeParams`` entry names a declared parameter; raises
    ``GraphError`` at the first that does not."""
    names = [p.name for p in params]
    for i, excluded in enumerate(node.cache.exclude_params):
        if excluded not in names:
            raise GraphError(
                f"{excluded!r} is not a parameter",
                _close(excluded, names),
                at=(*at, "cache", "excludeParams", i),
            )


def _first(*values: T | None) -> T | None:
    """The first value that is not None (a step's, its component's, the defaults')."""
    return next((value for value in values if value is not None), None)


def _templates_of(node: StepNode) -> Iterator[tuple[Loc, str]]:
    """Every template of ``node``, at its place within a step (``("command", 2)``)."""
    for i, arg in enumerate(node.command or ()):
        yield ("command", i), arg
    for key, value in node.env.items():
        yield ("env", key), value
    for key, value in node.inputs.artifacts.items():
        yield ("inputs", "artifacts", key), value
    for key, value in node.inputs.params.items():
        yield ("inputs", "params", key), value
    if node.when is not None:
        yield ("when",), node.when.text
    if node.foreach is not None and isinstance(node.foreach.items, str):
        yield ("foreach", "items"), node.foreach.items
    for key, value in (node.pipeline.params if node.pipeline else {}).items():
        yield ("pipeline", "params", key), value
    for r, role in enumerate(node.job.roles if node.job else ()):
        for i, arg in enumerate(role.command):
            yield ("job", "roles", r, "command", i), arg
        for key, value in role.env.items():
            yield ("job", "roles", r, "env", key), value


def _origin(spec: PipelineSpec, step: StepSpec, at: Loc, place: Loc) -> Loc:
    """Where the template at ``place`` of the step at ``at`` is written: the step, its
    component or the defaults (an error points there)."""
    component = spec.components.get(step.uses) if step.uses else None
    in_component: Loc = ("components", str(step.uses), *place)
    field = str(place[0])
    if field == "env":
        if place[1] in step.env:
            return (*at, *place)
        if component is not None and place[1] in component.env:
            return in_component
        return ("defaults", *place)
    if field in ("command", "job"):
        own = step.command is not None or step.job is not None
    else:
        own = getattr(step, field) is not None
    return (*at, *place) if own or component is None else in_component


def _references(place: Loc, text: str) -> tuple[Reference, ...]:
    if place[0] == "when":
        return Condition.parse(text).references
    return Template.parse(text).references


def _check_references(
    spec: PipelineSpec,
    step: StepSpec,
    node: StepNode,
    at: Loc,
    outputs: Mapping[str, Outputs],
    params: tuple[Param, ...],
) -> tuple[list[str], set[str]]:
    implied: list[str] = []
    used: set[str] = set()
    param_names = [p.name for p in params]
    for place, text in node.templates:
        try:
            references = _references(place, text)
        except TemplateError as error:  # a role's command in a job step: parsed only here
            fix = error.fix or "correct the template"
            raise GraphError(error.message, fix, at=_origin(spec, step, at, place)) from None
        for ref in references:
            problem = _problem(spec, node, place[0], ref, outputs, param_names)
            problem = problem or _kind_problem(place, ref, outputs, params)
            if problem is not None:
                where = _origin(spec, step, at, place)
                for_step = "" if where[:2] == at else f" (in step {node.name})"
                raise GraphError(f"{ref}: {problem[0]}{for_step}", problem[1], at=where)
            if ref.kind is Kind.PARAMS:
                used.add(ref.name)
            if ref.kind is Kind.STEPS and not node.final:
                implied.append(ref.step)
    return implied, used


def _problem(
    spec: PipelineSpec,
    node: StepNode,
    section: str | int,
    ref: Reference,
    outputs: Mapping[str, Outputs],
    param_names: list[str],
) -> tuple[str, str] | None:
    own_io = section not in ("inputs", "when", "foreach")
    match ref.kind:
        case Kind.PARAMS if ref.name not in param_names:
            return "no such parameter", _close(ref.name, param_names)
        case Kind.INPUTS | Kind.OUTPUTS if not own_io:
            return f"{ref.kind.value} cannot be used here", "refer to params or upstream steps"
        case Kind.INPUTS if ref.name not in {**node.inputs.artifacts, **node.inputs.params}:
            names = [*node.inputs.artifacts, *node.inputs.params]
            return (
                "the step has no such input",
                f"declare it under inputs; {_close(ref.name, names)}",
            )
        case Kind.OUTPUTS if ref.name not in node.outputs.names:
            names = list(node.outputs.names)
            return (
                "the step has no such output",
                f"declare it under outputs; {_close(ref.name, names)}",
            )
        case Kind.STEPS:
            return _step_problem(spec, node, ref, outputs)
        case Kind.ITEM:
            return _item_problem(node, section, ref)
    return None


def _kind_problem(
    where: Loc, ref: Reference, outputs: Mapping[str, Outputs], params: tuple[Param, ...]
) -> tuple[str, str] | None:
    """An input artifact must be an artifact; foreach items must be a list."""
    artifact = where[:2] == ("inputs", "artifacts") and ref.kind is Kind.STEPS
    if artifact and ref.name not in outputs[ref.step].artifacts:
        return "is an output param, not an artifact", "take it under inputs.params instead"
    if where[:2] == ("foreach", "items"):
        if ref.kind is Kind.STEPS and ref.name not in outputs[ref.step].params:
            return "is an artifact, not a value", "fan out over an output param (a JSON list)"
        types = {p.name: p.type for p in params}
        if ref.kind is Kind.PARAMS and types[ref.name] != "list":
            return f"is a {types[ref.name]} parameter", "fan out over a list parameter"
        if ref.kind not in (Kind.STEPS, Kind.PARAMS):
            return "items come from params or upstream outputs", "refer to one of those"
    return None


def _step_problem(
    spec: PipelineSpec, node: StepNode, ref: Reference, outputs: Mapping[str, Outputs]
) -> tuple[str, str] | None:
    if ref.step == node.name:
        return "a step cannot read its own outputs this way", f"use {{{{outputs.{ref.name}}}}}"
    if ref.step not in spec.steps:
        if ref.step in spec.finally_:
            return "finally steps cannot be referred to", "refer to normal steps only"
        return "no such step", _close(ref.step, list(spec.steps))
    names = list(outputs[ref.step].names)
    if ref.name not in names:
        return (
            f"step {ref.step!r} has no such output",
            f"declare it in its outputs; {_close(ref.name, names)}",
        )
    return None


def _item_problem(node: StepNode, section: str | int, ref: Reference) -> tuple[str, str] | None:
    if node.foreach is None:
        return "the step has no foreach", "add a foreach, or remove the reference"
    if section == "foreach":
        return "items cannot refer to the item", "refer to params or an upstream output"
    items = node.foreach.items
    if ref.name and isinstance(items, list):
        lacking = [
            i for i, item in enumerate(items) if not isinstance(item, dict) or ref.name not in item
        ]
        if lacking:
            return f"item {lacking[0]} has no key {ref.name!r}", "give every item that key"
    return None


def _check_depends_on(spec: PipelineSpec, name: str, step: StepSpec, final: bool) -> list[str]:
    at: Loc = ("finally" if final else "steps", name, "dependsOn")
    for i, dep in enumerate(step.depends_on):
        if dep == name:
            raise GraphError("a step cannot depend on itself", "remove this entry", at=(*at, i))
        if dep in spec.finally_:
            raise GraphError(
                f"{dep!r} is a finally step",
                "depend on normal steps only (finally steps run after all of them)",
                at=(*at, i),
            )
        if dep not in spec.steps:
            raise GraphError(f"{dep!r} is not a step", _close(dep, list(spec.steps)), at=(*at, i))
    return list(step.depends_on)


def _topological(spec: PipelineSpec, nodes: Mapping[str, StepNode]) -> tuple[str, ...]:
    """Kahn's order: a step once its dependencies are placed, the earliest declared first."""
    names = list(spec.steps)
    rank = {name: i for i, name in enumerate(names)}
    waiting = {name: len(set(nodes[name].depends_on)) for name in names}
    users: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for dep in set(nodes[name].depends_on):
            users[dep].append(name)
    ready = [rank[name] for name in names if not waiting[name]]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        order.append(name)
        for user in users[name]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, rank[user])
    if len(order) < len(names):
        placed = set(order)
        cycle = _cycle({n: list(nodes[n].depends_on) for n in names if n not in placed})
        raise GraphError(
            f"steps depend on each other in a cycle: {' -> '.join(cycle)}",
            "remove one dependsOn entry or reference of the cycle",
            at=("steps", cycle[0], "dependsOn"),
        )
    return tuple(order)


def _cycle(edges: dict[str, list[str]]) -> list[str]:
    """A cycle ``[a, b, ..., a]`` among ``edges`` (each node of which lies on or leads to
    one)."""
    path: list[str] = [next(iter(edges))]
    while True:
        following = next(d for d in edges[path[-1]] if d in edges)
        if following in path:
            return [*path[path.index(following) :], following]
        path.append(following)
