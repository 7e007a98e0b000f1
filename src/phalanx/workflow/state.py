"""The state of a run as the controller records it, and what can be read from it.

Phases of units and of runs, the transition table of a unit's phase, ``RunState``, and
pure queries on it: a step's phase as a whole (``step_phase``), its outputs as downstream
steps see them (``step_outputs``), the context of a unit's templates (``base_context``)
and the items a foreach step fans out to (``items_of``). ``phalanx.workflow.planner``
decides what happens next from the same state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, cast

from phalanx.domain.errors import IllegalTransition
from phalanx.domain.run import Phase
from phalanx.spec.pipeline.dag import Graph, StepNode
from phalanx.spec.pipeline.templates import Context, Kind, Template, TemplateError, Value, to_text

ENDED: Final = frozenset(
    {Phase.SUCCEEDED, Phase.FAILED, Phase.SKIPPED, Phase.CACHED, Phase.CANCELLED}
)
DONE: Final = frozenset({Phase.SUCCEEDED, Phase.CACHED})

#: Every change of a unit's phase the planner and the controller may make.
UNIT_TRANSITIONS: Final[Mapping[Phase, frozenset[Phase]]] = {
    Phase.PENDING: frozenset(
        {
            Phase.RUNNING,  # started (a plan's start)
            Phase.CACHED,  # started, and served from the cache instead of run
            Phase.SKIPPED,  # when false, upstream not succeeded, or failFast
            Phase.CANCELLED,  # the run was stopped before the unit started
            Phase.FAILED,  # when or foreach could not be evaluated
            Phase.SUCCEEDED,  # a foreach step with no items
        }
    ),
    # Running covers every attempt of the unit and the backoff between them.
    Phase.RUNNING: frozenset(
        {
            Phase.SUCCEEDED,  # its job succeeded (outputs read)
            Phase.CACHED,  # the cache lookup after the start hit: no job was run
            Phase.FAILED,  # its last attempt failed, timed out, or its outputs are bad
            Phase.CANCELLED,  # stopped (Plan.stop) or deleted
        }
    ),
    Phase.SUCCEEDED: frozenset(),
    Phase.FAILED: frozenset(),
    Phase.SKIPPED: frozenset(),
    Phase.CACHED: frozenset(),
    Phase.CANCELLED: frozenset(),
}


def check_transition(unit: Unit, old: Phase, new: Phase) -> None:
    """Raise ``IllegalTransition`` unless ``UNIT_TRANSITIONS`` allows ``old -> new``."""
    if new not in UNIT_TRANSITIONS[old]:
        raise IllegalTransition(f"unit {unit}: {old.value} -> {new.value} is not a transition")


@dataclass(frozen=True, slots=True, order=True)
class Unit:
    """One execution of ``step``: the step itself (``index`` None) or one foreach item."""

    step: str
    index: int | None = None

    def __str__(self) -> str:
        return self.step if self.index is None else f"{self.step}[{self.index}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunState:
    """What the controller knows of a run: phases and outputs of units, the run's params
    (resolved, see ``phalanx.spec.pipeline.params.resolve``) and whether a stop was asked."""

    params: Mapping[str, Value]
    phases: Mapping[Unit, Phase] = field(default_factory=dict)
    outputs: Mapping[Unit, Mapping[str, Value]] = field(default_factory=dict)
    expanded: Mapping[str, int] = field(default_factory=dict)  # items of each fanned-out step
    stopping: bool = False
    run_id: str = ""

    def phase(self, unit: Unit) -> Phase:
        """The unit's phase; Pending when not recorded."""
        return self.phases.get(unit, Phase.PENDING)


def items_of(graph: Graph, state: RunState, step: str) -> list[Value] | str:
    """The foreach items of ``step`` (its dependencies having succeeded), or why there are
    none to be had (a reason with its fix)."""
    node = graph.node(step)
    return items_from(node, base_context(graph, state, Unit(step)))


def items_from(node: StepNode, context: Context) -> list[Value] | str:
    """The foreach items of ``node`` read in ``context``, or why there are none to be had."""
    if node.foreach is None:
        return "the step has no foreach"
    items: Value
    if isinstance(node.foreach.items, list):
        return cast(list[Value], list(node.foreach.items))
    ref = node.items_reference
    if ref is None:  # pragma: no cover - the graph guarantees one reference
        return "foreach.items is not a reference"
    try:
        items = context.lookup(ref, field="foreach.items")
    except TemplateError as error:
        return str(error)
    if not isinstance(items, list):
        return (
            f"foreach.items: {ref} is {to_text(items)[:40]}, not a list; fix: produce a JSON list"
        )
    if len(items) > node.foreach.max_items:
        return (
            f"foreach.items: {ref} holds {len(items)} items, more than maxItems "
            f"({node.foreach.max_items}); fix: raise maxItems (at most 10000) or split the list"
        )
    return items


def step_outputs(graph: Graph, state: RunState, step: str) -> dict[str, Value]:
    """The outputs of ``step`` as downstream references see them: of a foreach step, a list
    per output with one entry per item (None where an item produced none)."""
    node = graph.node(step)
    if node.foreach is None:
        return dict(state.outputs.get(Unit(step), {}))
    count = state.expanded.get(step, 0)
    per_item = [state.outputs.get(Unit(step, i), {}) for i in range(count)]
    return {name: [values.get(name) for values in per_item] for name in node.outputs.names}


def base_context(
    graph: Graph, state: RunState, unit: Unit, *, item: Value = None, has_item: bool = False
) -> Context:
    """The context of ``unit``'s templates without its inputs and outputs (which the
    controller adds: paths in the run's workspace): params, run id, item, and the outputs
    of every step that ended Succeeded or Cached."""
    done = {
        name: step_outputs(graph, state, name)
        for name in graph.order
        if step_phase(graph, state, name) in DONE
    }
    return Context(
        step=unit.step,
        params=state.params,
        steps=done,
        item=item,
        has_item=has_item,
        run_id=state.run_id,
    )


def render_value(text: str, context: Context, *, field: str) -> Value:
    """A template's value: the referenced value itself when the template is exactly one
    reference (a list stays a list), else the rendered text."""
    template = Template.parse(text)
    single = template.single
    if single is not None and single.kind is not Kind.RUN:
        return context.lookup(single, field=field)
    return template.render(context, field=field)


def step_phase(graph: Graph, state: RunState, step: str) -> Phase:
    """The phase of ``step`` as a whole (see the module docstring)."""
    own = state.phases.get(Unit(step))
    if graph.node(step).foreach is None or own is not None:
        return own or Phase.PENDING
    count = state.expanded.get(step)
    if count is None:
        return Phase.PENDING
    return _aggregate([state.phase(Unit(step, i)) for i in range(count)])


def _aggregate(phases: list[Phase]) -> Phase:
    if not all(p in ENDED for p in phases):
        return Phase.RUNNING if any(p is not Phase.PENDING for p in phases) else Phase.PENDING
    for outcome in (Phase.FAILED, Phase.CANCELLED):
        if outcome in phases:
            return outcome
    if all(p is Phase.SKIPPED for p in phases):
        return Phase.SKIPPED
    return Phase.CACHED if all(p is Phase.CACHED for p in phases) else Phase.SUCCEEDED
