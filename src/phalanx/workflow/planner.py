"""The run's state machine: given each unit's phase and outputs, what happens next.

A *unit* is one execution of a step: ``Unit("train")``, or ``Unit("train", 3)`` for item
3 of a foreach step (whose step-level ``Unit("train")`` records an outcome decided
before any item exists: skipped, failed to expand, no items). The controller owns the
phases and outputs; ``plan`` reads them and returns what to do; the controller does it
(starts jobs, or serves them from the cache), records the new phases and the item count
of each step the plan fanned out (``apply`` does both) and calls ``plan`` again after
changes (once per batch of events is enough: a call costs time linear in the units of the
run). A unit the controller has not recorded is Pending. The phases, ``RunState`` and the
queries on it live in ``phalanx.workflow.state``.

Rules (each a guarantee, checked by property tests):

- A unit starts only when every dependency of its step has ended Succeeded or Cached,
  its ``when`` holds, fewer than ``foreach.maxParallel`` units of its step and fewer
  than ``concurrency`` units of the run are Running; starts are in graph order, then item
  order (deterministic). ``when`` is evaluated in that order up to the first unit that
  could start but finds no slot.
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

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from phalanx.domain.run import Phase, RunPhase
from phalanx.spec.pipeline.conditions import ConditionError
from phalanx.spec.pipeline.dag import Graph, StepNode
from phalanx.spec.pipeline.templates import Context, TemplateError, Value
from phalanx.workflow.state import (
    DONE,
    ENDED,
    UNIT_TRANSITIONS,
    RunState,
    Unit,
    base_context,
    check_transition,
    items_from,
    items_of,
    render_value,
    step_outputs,
    step_phase,
)


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


class _Planning:
    """One call of ``plan``: phases and expansions as decided so far, running counts, and
    each step's phase and outputs, cached until one of its units changes."""

    def __init__(self, graph: Graph, state: RunState) -> None:
        self.graph = graph
        self.state = state
        self.phases: dict[Unit, Phase] = dict(state.phases)
        self.expanded: dict[str, int] = dict(state.expanded)
        self.expand: list[tuple[str, int]] = []
        self.start: list[Start] = []
        self.settle: list[Settle] = []
        running = [u for u, p in self.phases.items() if p is Phase.RUNNING]
        self.running = len(running)
        self.running_in = Counter(u.step for u in running)
        failed = sorted(
            u for u, p in self.phases.items() if p is Phase.FAILED and u.step in graph.steps
        )
        self.first_failure: Unit | None = failed[0] if failed else None
        self._phase: dict[str, Phase] = {}
        self._outputs: dict[str, dict[str, Value]] = {}

    def view(self) -> RunState:
        return replace(self.state, phases=self.phases, expanded=self.expanded)

    def phase_of(self, step: str) -> Phase:
        if step not in self._phase:
            self._phase[step] = step_phase(self.graph, self.view(), step)
        return self._phase[step]

    def context(self, unit: Unit) -> Context:
        """``base_context`` of ``unit``, from the cached outputs of the steps done."""
        done: dict[str, Mapping[str, Value]] = {}
        for name in self.graph.order:
            if self.phase_of(name) in DONE:
                if name not in self._outputs:
                    self._outputs[name] = step_outputs(self.graph, self.view(), name)
                done[name] = self._outputs[name]
        return Context(
            step=unit.step, params=self.state.params, steps=done, run_id=self.state.run_id
        )

    def changed(self, step: str) -> None:
        self._phase.pop(step, None)
        self._outputs.pop(step, None)

    def decide(self, unit: Unit, phase: Phase, reason: str) -> None:
        self.phases[unit] = phase
        self.changed(unit.step)
        self.settle.append(Settle(unit=unit, phase=phase, reason=reason))
        if phase is Phase.FAILED and self.first_failure is None and unit.step in self.graph.steps:
            self.first_failure = unit

    def blocked(self) -> str | None:
        if self.state.stopping:
            return "the run was stopped"
        if self.graph.on_failure == "failFast" and self.first_failure is not None:
            return f"not started: {self.first_failure} failed (onFailure: failFast)"
        return None

    def pending_units(self, step: str) -> Iterator[Unit]:
        count = self.expanded.get(step)
        units = [Unit(step)] if count is None else (Unit(step, i) for i in range(count))
        return (u for u in units if self.phases.get(u, Phase.PENDING) is Phase.PENDING)

    def normal(self, name: str) -> None:
        node = self.graph.steps[name]
        if self.phase_of(name) in ENDED:
            return
        blocked = self.blocked()
        if blocked is not None:
            phase = Phase.CANCELLED if self.state.stopping else Phase.SKIPPED
            for unit in list(self.pending_units(name)):
                self.decide(unit, phase, blocked)
            return
        phases = {dep: self.phase_of(dep) for dep in node.depends_on}
        if not all(p in ENDED for p in phases.values()):
            return
        bad = next((dep for dep, p in phases.items() if p not in DONE), None)
        if bad is not None:
            self.decide(Unit(name), Phase.SKIPPED, f"upstream step {bad} ended {phases[bad].value}")
            return
        self.run(node)

    def items(self, node: StepNode, context: Context) -> list[Value] | None:
        """The items of a foreach ``node``, expanding it now if it was not (None: the step
        was settled instead)."""
        found = items_from(node, context)
        if isinstance(found, str):
            self.decide(Unit(node.name), Phase.FAILED, found)
            return None
        if not found:
            self.decide(Unit(node.name), Phase.SUCCEEDED, "foreach has no items")
            return None
        if node.name not in self.expanded:
            self.expanded[node.name] = len(found)
            self.expand.append((node.name, len(found)))
            self.changed(node.name)
        return found

    def full(self, node: StepNode) -> bool:
        """Whether ``node`` may start no unit now (maxParallel or concurrency reached)."""
        parallel = node.foreach.max_parallel if node.foreach else None
        if parallel is not None and self.running_in[node.name] >= parallel:
            return True
        return self.graph.concurrency is not None and self.running >= self.graph.concurrency

    def run(self, node: StepNode) -> None:
        """Expand ``node`` if it fans out, then settle or start its pending units in order,
        until its limits are reached."""
        context = self.context(Unit(node.name))
        items: list[Value] = []
        if node.foreach is not None:
            found = self.items(node, context)
            if found is None:
                return
            items = found
        for unit in list(self.pending_units(node.name)):
            if self.full(node):
                return
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
            self.start.append(Start(unit=unit, item=item, has_item=has_item))
            self.phases[unit] = Phase.RUNNING
            self.changed(node.name)
            self.running_in[node.name] += 1
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
    if all(work.phase_of(name) in ENDED for name in graph.order):
        for node in graph.final.values():
            if work.phase_of(node.name) not in ENDED:
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
    names = [*graph.order, *graph.final]
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


__all__ = [
    "DONE",
    "ENDED",
    "UNIT_TRANSITIONS",
    "Phase",
    "Plan",
    "RunPhase",
    "RunState",
    "Settle",
    "Start",
    "Unit",
    "apply",
    "base_context",
    "check_transition",
    "items_of",
    "plan",
    "render_value",
    "step_outputs",
    "step_phase",
]
