"""Resume: the first state of a run that reuses what an earlier run of the graph did.

``resume_state`` decides which units of ``previous`` are reused: a unit that ended
Succeeded or Cached is reused (recorded Cached, with its outputs and the item count of
its step) unless its step must run again. A step runs again when it is ``from_step`` or
downstream of it, when it did not succeed and has no succeeded item to keep, when it reads
a parameter whose value changed, or when it is downstream of any step that runs again.
A foreach step that failed only in some items keeps its succeeded items and reruns the
others (and its downstream runs again). ``finally`` steps always run again. Guarantees:
nothing that runs again keeps a phase or an output of ``previous``; every reused unit is
listed in the result (the controller records where its outputs came from).
"""

from __future__ import annotations

from collections.abc import Mapping

from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline.dag import Graph
from phalanx.spec.pipeline.templates import Value
from phalanx.workflow.planner import DONE, Phase, RunState, Unit, step_phase


def _rerun(
    graph: Graph, previous: RunState, params: Mapping[str, Value], from_step: str | None
) -> tuple[set[str], set[str]]:
    """The steps that run again in full, and the foreach steps that keep some items."""
    changed = {name for name in params if params.get(name) != previous.params.get(name)}
    again: set[str] = set()
    partial: set[str] = set()
    if from_step is not None:
        again |= {from_step, *graph.downstream(from_step)}
    for name in graph.order:
        node = graph.steps[name]
        if name in again:
            continue
        if node.params_used & changed or any(
            dep in again or dep in partial for dep in node.depends_on
        ):
            again.add(name)
            continue
        if step_phase(graph, previous, name) in DONE:
            continue
        kept = [
            unit
            for unit, phase in previous.phases.items()
            if unit.step == name and unit.index is not None and phase in DONE
        ]
        (partial if kept and Unit(name) not in previous.phases else again).add(name)
    return again, partial


def resume_state(
    graph: Graph,
    previous: RunState,
    *,
    params: Mapping[str, Value],
    run_id: str,
    from_step: str | None = None,
) -> tuple[RunState, tuple[Unit, ...]]:
    """The new run's state and the units it reuses (see the module docstring); raises
    ``InvalidInput`` when ``from_step`` is not a normal step of the graph."""
    if from_step is not None and from_step not in graph.steps:
        known = ", ".join(graph.order)
        raise InvalidInput(
            f"{from_step[:60]!r} is not a step of this pipeline",
            field="from",
            fix=f"use one of {known}",
        )
    again, _partial = _rerun(graph, previous, params, from_step)
    reused = sorted(
        unit
        for unit, phase in previous.phases.items()
        if phase in DONE and unit.step in graph.steps and unit.step not in again
    )
    expanded = {
        step: count
        for step, count in previous.expanded.items()
        if step in graph.steps and step not in again
    }
    state = RunState(
        params=dict(params),
        phases=dict.fromkeys(reused, Phase.CACHED),
        outputs={unit: previous.outputs[unit] for unit in reused if unit in previous.outputs},
        expanded=expanded,
        run_id=run_id,
    )
    return state, tuple(reused)
