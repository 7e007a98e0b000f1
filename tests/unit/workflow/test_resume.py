"""Resume reuses exactly the units that need not run again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import InvalidInput
from phalanx.spec.loader import build_pipeline, load_pipelines
from phalanx.spec.pipeline.dag import Graph, build_graph
from phalanx.workflow.planner import DONE, Phase, RunPhase, RunState, Unit, apply, plan
from phalanx.workflow.resume import resume_state
from tests.unit.workflow.examples import TRI


def tri() -> Graph:
    return build_graph(load_pipelines(TRI)[0].spec)


def finished(graph: Graph, state: RunState, outcome: dict[Unit, Phase]) -> RunState:
    """Drive the run to its end, every unit ending as ``outcome`` says (else Succeeded)."""
    while not (p := plan(graph, state)).finished:
        state = apply(state, p)
        for start in p.start:
            phase = outcome.get(start.unit, Phase.SUCCEEDED)
            outputs = {"out": f"{state.run_id}:{start.unit}"} if phase is Phase.SUCCEEDED else None
            state = RunState(
                params=state.params,
                phases={**state.phases, start.unit: phase},
                outputs={**state.outputs, **({start.unit: outputs} if outputs else {})},
                expanded=state.expanded,
                run_id=state.run_id,
            )
    return state


def test_fix_and_resume_reruns_only_the_failed_step() -> None:
    graph = tri()
    first = finished(
        graph, RunState(params={"lr": 0.01}, run_id="r1"), {Unit("validate"): Phase.FAILED}
    )
    state, reused = resume_state(graph, first, params={"lr": 0.01}, run_id="r2")
    assert reused == (Unit("prep"), Unit("train"))
    assert state.phases == {Unit("prep"): Phase.CACHED, Unit("train"): Phase.CACHED}
    assert state.outputs[Unit("train")] == {"out": "r1:train"}  # the original model
    p = plan(graph, state)
    assert [str(s.unit) for s in p.start] == ["validate"]


def test_resume_from_a_step_with_a_new_param_reruns_it_and_its_downstream() -> None:
    graph = tri()
    first = finished(graph, RunState(params={"lr": 0.01}, run_id="r1"), {})
    state, reused = resume_state(graph, first, params={"lr": 0.1}, run_id="r2", from_step="train")
    assert reused == (Unit("prep"),)
    assert [str(s.unit) for s in plan(graph, state).start] == ["train"]
    assert state.params == {"lr": 0.1}
    _, reused = resume_state(graph, first, params={"lr": 0.1}, run_id="r2")
    assert reused == (Unit("prep"),)  # train reads lr, which changed
    with pytest.raises(
        InvalidInput,
        match="'trian' is not a step of this pipeline; fix: use one of prep, train, validate",
    ):
        resume_state(graph, first, params={"lr": 0.1}, run_id="r2", from_step="trian")


def test_a_fan_out_with_failed_items_reruns_only_those_items() -> None:
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "sweep"},
        "spec": {
            "defaults": {"resources": {"cpu": 1}},
            "onFailure": "continue",
            "steps": {
                "each": {
                    "command": ["x", "{{item}}"],
                    "foreach": {"items": list(range(20)), "maxItems": 20, "maxParallel": 8},
                },
                "after": {"command": ["y"], "dependsOn": ["each"]},
            },
            "finally": {"z": {"command": ["z"]}},
        },
    }
    graph = build_graph(build_pipeline(document).spec)
    failing = {Unit("each", i): Phase.FAILED for i in (3, 7, 11)}
    first = finished(graph, RunState(params={}, run_id="r1"), failing)
    assert plan(graph, first).phase is RunPhase.FAILED
    state, reused = resume_state(graph, first, params={}, run_id="r2")
    assert len(reused) == 17 and all(u.step == "each" for u in reused)
    p = plan(graph, state)
    assert [str(s.unit) for s in p.start] == ["each[3]", "each[7]", "each[11]"]
    second = finished(graph, state, {})
    assert plan(graph, second).phase is RunPhase.SUCCEEDED
    assert second.phases[Unit("after")] is Phase.SUCCEEDED
    assert second.phases[Unit("z")] is Phase.SUCCEEDED


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_reused_units_never_include_what_must_run_again(data: st.DataObject) -> None:
    graph = tri()
    outcome = {
        Unit(n): data.draw(st.sampled_from([Phase.SUCCEEDED, Phase.FAILED, Phase.CACHED]))
        for n in graph.order
    }
    first = finished(graph, RunState(params={"lr": 0.01}, run_id="r1"), outcome)
    start: Any = data.draw(st.sampled_from([None, *graph.order]))
    lr = data.draw(st.sampled_from([0.01, 0.5]))
    state, reused = resume_state(graph, first, params={"lr": lr}, run_id="r2", from_step=start)
    again = set() if start is None else {start, *graph.downstream(start)}
    for unit in reused:
        assert first.phases[unit] in DONE
        assert unit.step not in again
        assert not (lr != 0.01 and "lr" in graph.steps[unit.step].params_used)
        assert all(dep in {u.step for u in reused} for dep in graph.steps[unit.step].depends_on)
    assert finished(graph, state, {}).phases.keys() >= {Unit(n) for n in graph.order}
