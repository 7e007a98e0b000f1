"""The run's state machine: given each unit's phase and outputs, what happens next.

A *unit* is one execution of a step: ``Unit("train")``, or ``Unit("train", 3)`` for item
3 of a foreach step (whose step-level ``Unit("train")`` records an outcome decided
before any item exists: skipped, failed to expand, no items). The controller owns the
phases and outputs; ``plan`` reads them and returns what to do; the controller does it
(starts jobs, or serves them from the cache), records the new phases and the item count
of each step the plan fanned out (``apply`` does both) and calls ``plan`` again on every
change. A unit the controller has
not recorded is Pending.

Rules (each a guarantee, checked by property tests):

- A unit starts only when every dependency of its step has ended Succeeded or Cached,
  its ``when`` holds, fewer than ``foreach.maxParallel`` units of its step and fewer
  than ``concurrency`` units of the run are Running; starts are in graph order, then item
  order (deterministic).
- A step whose dependency ended Failed, Skipped or Cancelled is Skipped (with the reason);
  ``when`` false: Skipped. A ``when`` or fan-out that cannot be evaluated (a missing
  output, a type error, more items than ``maxItems``): Failed, with the reason.
- ``onFailure: failFast``: once a unit has Failed, no other normal unit starts; those not
  started are Skipped. ``continue``: only what depends on the failure is Skipped.
- Stop (``RunState.stopping``): no normal unit starts; those not started are Cancelled;
  Running ones are listed in ``Plan.stop`` for the controller to cancel.
- ``finally`` steps start once, when every normal unit has ended, whatever the outcome
  (also after a stop), and are never skipped for an upstream failure.
- The run is finished when every unit of every step has ended. Its phase: Cancelled if
  stopped, else Failed if any step Failed or was Cancelled, else Succeeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final, cast

from phalanx.domain.errors import IllegalTransition
from phalanx.workflow.conditions import ConditionError
from phalanx.workflow.dag import Graph, StepNode
from phalanx.workflow.templates import Context, Kind, Template, TemplateError, Value, to_text


class Phase(StrEnum):
    """A unit's (and, aggregated, a step's) phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SKIPPED = "Skipped"
    CACHED = "Cached"  # succeeded by reusing an earlier result
    CANCELLED = "Cancelled"


class RunPhase(StrEnum):
    """A run's phase (``plan`` answers Running or a final one; Pending is the controller's:
    a run recorded and not yet planned)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


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
    (resolved, see ``phalanx.workflow.params.resolve``) and whether a stop was asked."""

    params: Mapping[str, Value]
    phases: Mapping[Unit, Phase] = field(default_factory=dict)
    outputs: Mapping[Unit, Mapping[str, Value]] = field(default_factory=dict)
    expanded: Mapping[str, int] = field(default_factory=dict)  # items of each fanned-out step
    stopping: bool = False
    run_id: str = ""

    def phase(self, unit: Unit) -> Phase:
        """The unit's phase; Pending when not recorded."""
        return self.phases.get(unit, Phase.PENDING)


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """Start ``unit`` (``item``: its foreach item, when ``has_item``)."""

    unit: Unit
    item: Value = None
    has_item: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Settle:
    """Record ``unit`` as ended in ``phase`` without running it, for ``reason``."""

    unit: Unit
    phase: Phase
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What to do now. Empty ``expand``, ``start``, ``settle`` and ``stop``: wait for an
    event."""

    expand: tuple[tuple[str, int], ...] = ()  # foreach steps fanned out now, and their items
    start: tuple[Start, ...] = ()
    settle: tuple[Settle, ...] = ()
    stop: tuple[Unit, ...] = ()  # Running units to cancel (the run is stopping)
    phase: RunPhase = RunPhase.RUNNING

    @property
    def finished(self) -> bool:
        """Whether the run has ended (``phase`` is final)."""
        return self.phase is not RunPhase.RUNNING


def items_of(graph: Graph, state: RunState, step: str) -> list[Value] | str:
    """The foreach items of ``step`` (its dependencies having succeeded), or why there are
    none to be had (a reason with its fix)."""
    node = graph.node(step)
    if node.foreach is None:
        return "the step has no foreach"
    items: Value
    if isinstance(node.foreach.items, list):
        return cast(list[Value], list(node.foreach.items))
    ref = node.items_reference
    if ref is None:  # pragma: no cover - the graph guarantees one reference
        return "foreach.items is not a reference"
    try:
        items = base_context(graph, state, Unit(step)).lookup(ref, field="foreach.items")
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


class _Planning:
    """One call of ``plan``: phases and expansions as decided so far, running counts."""

    def __init__(self, graph: Graph, state: RunState) -> None:
        self.graph = graph
        self.state = state
        self.phases: dict[Unit, Phase] = dict(state.phases)
        self.expanded: dict[str, int] = dict(state.expanded)
        self.expand: list[tuple[str, int]] = []
        self.start: list[Start] = []
        self.settle: list[Settle] = []
        self.running = sum(p is Phase.RUNNING for p in self.phases.values())
        failed = sorted(
            u for u, p in self.phases.items() if p is Phase.FAILED and u.step in graph.steps
        )
        self.first_failure: Unit | None = failed[0] if failed else None

    def view(self) -> RunState:
        return replace(self.state, phases=self.phases, expanded=self.expanded)

    def decide(self, unit: Unit, phase: Phase, reason: str) -> None:
        self.phases[unit] = phase
        self.settle.append(Settle(unit=unit, phase=phase, reason=reason))
        if phase is Phase.FAILED and self.first_failure is None and unit.step in self.graph.steps:
            self.first_failure = unit

    def blocked(self) -> str | None:
        if self.state.stopping:
            return "the run was stopped"
        if self.graph.on_failure == "failFast" and self.first_failure is not None:
            return f"not started: {self.first_failure} failed (onFailure: failFast)"
        return None

    def pending_units(self, step: str) -> list[Unit]:
        count = self.expanded.get(step)
        units = [Unit(step)] if count is None else [Unit(step, i) for i in range(count)]
        return [u for u in units if self.phases.get(u, Phase.PENDING) is Phase.PENDING]

    def normal(self, name: str) -> None:
        node = self.graph.steps[name]
        view = self.view()
        if step_phase(self.graph, view, name) in ENDED:
            return
        blocked = self.blocked()
        if blocked is not None:
            phase = Phase.CANCELLED if self.state.stopping else Phase.SKIPPED
            for unit in self.pending_units(name):
                self.decide(unit, phase, blocked)
            return
        phases = {dep: step_phase(self.graph, view, dep) for dep in node.depends_on}
        if not all(p in ENDED for p in phases.values()):
            return
        bad = next((dep for dep, p in phases.items() if p not in DONE), None)
        if bad is not None:
            self.decide(Unit(name), Phase.SKIPPED, f"upstream step {bad} ended {phases[bad].value}")
            return
        self.run(node)

    def items(self, node: StepNode) -> list[Value] | None:
        """The items of a foreach ``node``, expanding it now if it was not (None: the step
        was settled instead)."""
        found = items_of(self.graph, self.view(), node.name)
        if isinstance(found, str):
            self.decide(Unit(node.name), Phase.FAILED, found)
            return None
        if not found:
            self.decide(Unit(node.name), Phase.SUCCEEDED, "foreach has no items")
            return None
        if node.name not in self.expanded:
            self.expanded[node.name] = len(found)
            self.expand.append((node.name, len(found)))
        return found

    def run(self, node: StepNode) -> None:
        """Expand ``node`` if it fans out, then settle or start its pending units."""
        items: list[Value] = []
        if node.foreach is not None:
            found = self.items(node)
            if found is None:
                return
            items = found
        running = sum(p is Phase.RUNNING for u, p in self.phases.items() if u.step == node.name)
        context = base_context(self.graph, self.view(), Unit(node.name))
        parallel = node.foreach.max_parallel if node.foreach else None
        for unit in self.pending_units(node.name):
            has_item = unit.index is not None
            item = items[unit.index] if unit.index is not None else None
            if node.when is not None:
                try:
                    holds = node.when.evaluate(replace(context, item=item, has_item=has_item))
                except (ConditionError, TemplateError) as error:
                    self.decide(unit, Phase.FAILED, str(error))
                    continue
                if not holds:
                    self.decide(unit, Phase.SKIPPED, f"when is false: {node.when.text[:200]}")
                    continue
            if parallel is not None and running >= parallel:
                continue
            if self.graph.concurrency is not None and self.running >= self.graph.concurrency:
                continue
            self.start.append(Start(unit=unit, item=item, has_item=has_item))
            self.phases[unit] = Phase.RUNNING
            running += 1
            self.running += 1


def plan(graph: Graph, state: RunState) -> Plan:
    """What to do now for the run ``state`` of ``graph`` (see the module docstring).

    Pure and deterministic. The controller must record a plan's starts (Running, or
    Cached/Succeeded when served from cache) and settles before calling ``plan`` again,
    or the same units are listed again.
    """
    work = _Planning(graph, state)
    for name in graph.order:
        work.normal(name)
    normal_ended = all(step_phase(graph, work.view(), n) in ENDED for n in graph.order)
    if normal_ended:
        for node in graph.final.values():
            if step_phase(graph, work.view(), node.name) not in ENDED:
                work.run(node)
    stop: tuple[Unit, ...] = ()
    if state.stopping:
        stop = tuple(
            sorted(
                u for u, p in state.phases.items() if p is Phase.RUNNING and u.step in graph.steps
            )
        )
    return Plan(
        expand=tuple(work.expand),
        start=tuple(work.start),
        settle=tuple(work.settle),
        stop=stop,
        phase=_run_phase(graph, work.view()),
    )


def _run_phase(graph: Graph, state: RunState) -> RunPhase:
    names: Iterable[str] = [*graph.order, *graph.final]
    phases = [step_phase(graph, state, name) for name in names]
    if not all(p in ENDED for p in phases):
        return RunPhase.RUNNING
    if state.stopping:
        return RunPhase.CANCELLED
    if any(p in (Phase.FAILED, Phase.CANCELLED) for p in phases):
        return RunPhase.FAILED
    return RunPhase.SUCCEEDED


def apply(state: RunState, plan: Plan) -> RunState:
    """``state`` with ``plan`` recorded: started units Running, settled ones in their phase
    (what a controller does when it runs every start as a job)."""
    phases = dict(state.phases)
    phases.update({start.unit: Phase.RUNNING for start in plan.start})
    phases.update({settle.unit: settle.phase for settle in plan.settle})
    return replace(state, phases=phases, expanded={**state.expanded, **dict(plan.expand)})
