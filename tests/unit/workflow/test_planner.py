"""The run state machine: scenarios, then invariants over random pipelines and events."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import IllegalTransition
from phalanx.spec.loader import build_pipeline
from phalanx.spec.pipeline.dag import Graph, build_graph
from phalanx.workflow.planner import (
    DONE,
    ENDED,
    UNIT_TRANSITIONS,
    Phase,
    Plan,
    RunPhase,
    RunState,
    Unit,
    apply,
    base_context,
    check_transition,
    plan,
    render_value,
    step_outputs,
    step_phase,
)
from tests.unit.workflow.examples import FULL, TRI

RES = {"cpu": 1, "memory": "1Gi"}


def graph_of(steps: dict[str, Any], **spec: Any) -> Graph:
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "p"},
        "spec": {"defaults": {"resources": RES}, "steps": steps, **spec},
    }
    return build_graph(build_pipeline(document).spec)


def step(**fields: Any) -> dict[str, Any]:
    return {"command": ["true"], **fields}


def end(state: RunState, unit: Unit, phase: Phase, **outputs: Any) -> RunState:
    new_outputs = dict(state.outputs)
    if outputs:
        new_outputs[unit] = outputs
    return RunState(
        params=state.params,
        phases={**state.phases, unit: phase},
        outputs=new_outputs,
        expanded=state.expanded,
        stopping=state.stopping,
        run_id=state.run_id,
    )


def started(p: Plan) -> list[str]:
    return [str(s.unit) for s in p.start]


def test_a_chain_runs_in_order_and_succeeds() -> None:
    from phalanx.spec.loader import load_pipelines

    graph = build_graph(load_pipelines(TRI)[0].spec)
    state = RunState(params={"lr": 0.01}, run_id="r1")
    for name in ("prep", "train", "validate"):
        p = plan(graph, state)
        assert started(p) == [name] and not p.finished
        state = apply(state, p)
        assert plan(graph, state) == Plan()  # nothing new until an event
        state = end(state, Unit(name), Phase.SUCCEEDED)
    assert plan(graph, state).phase is RunPhase.SUCCEEDED


def test_fail_fast_skips_what_has_not_started_and_finally_still_runs() -> None:
    graph = graph_of(
        {"a": step(), "b": step(), "c": step(dependsOn=["a"])},
        **{"finally": {"z": step()}},
    )
    state = apply(RunState(params={}), p := plan(graph, RunState(params={})))
    assert started(p) == ["a", "b"]
    state = end(state, Unit("b"), Phase.FAILED)
    p = plan(graph, state)
    assert [(str(s.unit), s.phase, s.reason) for s in p.settle] == [
        ("c", Phase.SKIPPED, "not started: b failed (onFailure: failFast)")
    ]
    assert not p.start  # a is still running: finally waits
    state = end(apply(state, p), Unit("a"), Phase.SUCCEEDED)
    p = plan(graph, state)
    assert started(p) == ["z"]
    state = end(apply(state, p), Unit("z"), Phase.SUCCEEDED)
    assert plan(graph, state).phase is RunPhase.FAILED


def test_continue_skips_only_the_downstream_of_a_failure() -> None:
    graph = graph_of(
        {"a": step(), "b": step(), "c": step(dependsOn=["a"]), "d": step(dependsOn=["b"])},
        onFailure="continue",
    )
    state = apply(RunState(params={}), plan(graph, RunState(params={})))
    state = end(state, Unit("a"), Phase.FAILED)
    p = plan(graph, state)
    assert [(str(s.unit), s.reason) for s in p.settle] == [("c", "upstream step a ended Failed")]
    state = end(apply(state, p), Unit("b"), Phase.CACHED)
    p = plan(graph, state)
    assert started(p) == ["d"]
    state = end(apply(state, p), Unit("d"), Phase.SUCCEEDED)
    assert plan(graph, state).phase is RunPhase.FAILED


def test_when_reads_upstream_outputs_and_a_skipped_step_skips_its_downstream() -> None:
    graph = graph_of(
        {
            "eval": step(outputs={"params": {"acc": {"type": "float"}}}),
            "promote": step(when="{{steps.eval.outputs.acc}} >= {{params.t}}"),
            "announce": step(dependsOn=["promote"]),
        },
        params={"t": 0.9},
    )
    state = apply(RunState(params={"t": 0.9}), plan(graph, RunState(params={"t": 0.9})))
    state = end(state, Unit("eval"), Phase.SUCCEEDED, acc=0.5)
    p = plan(graph, state)
    assert [(str(s.unit), s.phase) for s in p.settle] == [
        ("promote", Phase.SKIPPED),
        ("announce", Phase.SKIPPED),
    ]
    assert p.settle[0].reason.startswith("when is false: {{steps.eval.outputs.acc}}")
    assert p.phase is RunPhase.SUCCEEDED  # a skipped step is not a failure
    high = end(state, Unit("eval"), Phase.SUCCEEDED, acc=0.95)
    assert started(plan(graph, high)) == ["promote"]


def test_a_condition_on_a_missing_output_fails_the_step_with_the_reason() -> None:
    graph = graph_of(
        {
            "eval": step(outputs={"params": {"acc": {"type": "float"}}}),
            "promote": step(when="{{steps.eval.outputs.acc}} > 1"),
        }
    )
    state = end(
        apply(RunState(params={}), plan(graph, RunState(params={}))), Unit("eval"), Phase.SUCCEEDED
    )
    [settle] = plan(graph, state).settle
    assert settle.phase is Phase.FAILED
    assert (
        "step promote, when: {{steps.eval.outputs.acc}}: step 'eval' has no output 'acc'"
        in settle.reason
    )


def test_fan_out_respects_max_parallel_and_concurrency() -> None:
    graph = graph_of(
        {
            "make": step(outputs={"params": {"xs": {"type": "list"}}}),
            "each": step(
                foreach={"items": "{{steps.make.outputs.xs}}", "maxItems": 200, "maxParallel": 8},
                command=["train", "{{item}}"],
                outputs={"params": {"score": {}}},
            ),
            "side": step(dependsOn=["make"]),
        },
        concurrency=8,
        onFailure="continue",
    )
    state = apply(RunState(params={}), plan(graph, RunState(params={})))
    state = end(state, Unit("make"), Phase.SUCCEEDED, xs=list(range(200)))
    p = plan(graph, state)
    assert p.expand == (("each", 200),)
    assert started(p) == [f"each[{i}]" for i in range(8)]  # 8 of each, side must wait
    assert [s.item for s in p.start] == list(range(8))
    state = apply(state, p)
    finished = 0
    while not (p := plan(graph, state)).finished:
        running = [u for u, ph in state.phases.items() if ph is Phase.RUNNING]
        assert len(running) <= 8
        assert sum(u.step == "each" for u in running) <= 8
        state = apply(state, p)
        unit = min(u for u, ph in state.phases.items() if ph is Phase.RUNNING)
        outcome = Phase.FAILED if unit.index in (3, 50, 150) else Phase.SUCCEEDED
        outputs = {"score": unit.index or 0} if outcome is Phase.SUCCEEDED else {}
        state = end(state, unit, outcome, **outputs)
        finished += 1
    assert finished == 201  # 200 items and side (make ended before)
    assert step_phase(graph, state, "each") is Phase.FAILED
    failed = sorted(u.index for u, ph in state.phases.items() if ph is Phase.FAILED)
    assert failed == [3, 50, 150]
    assert p.phase is RunPhase.FAILED
    scores = step_outputs(graph, state, "each")["score"]
    assert isinstance(scores, list) and len(scores) == 200 and scores[3] is None


def test_fan_out_over_too_many_items_fails_the_step_and_empty_succeeds() -> None:
    graph = graph_of(
        {
            "make": step(outputs={"params": {"xs": {}}}),
            "each": step(foreach={"items": "{{steps.make.outputs.xs}}", "maxItems": 10}),
        },
        onFailure="continue",
    )
    state = apply(RunState(params={}), plan(graph, RunState(params={})))
    [settle] = plan(
        graph, end(state, Unit("make"), Phase.SUCCEEDED, xs=list(range(100_000)))
    ).settle
    assert (
        settle.phase is Phase.FAILED
        and "holds 100000 items, more than maxItems (10)" in settle.reason
    )
    [settle] = plan(graph, end(state, Unit("make"), Phase.SUCCEEDED, xs="nope")).settle
    assert settle.phase is Phase.FAILED and "not a list" in settle.reason
    p = plan(graph, end(state, Unit("make"), Phase.SUCCEEDED, xs=[]))
    assert [(str(s.unit), s.phase) for s in p.settle] == [("each", Phase.SUCCEEDED)]
    assert p.phase is RunPhase.SUCCEEDED


def test_stop_cancels_pending_lists_running_and_still_runs_finally() -> None:
    graph = graph_of({"a": step(), "b": step(dependsOn=["a"])}, **{"finally": {"z": step()}})
    state = apply(RunState(params={}), plan(graph, RunState(params={})))
    stopping = RunState(params={}, phases=state.phases, stopping=True)
    p = plan(graph, stopping)
    assert p.stop == (Unit("a"),)
    assert [(str(s.unit), s.phase) for s in p.settle] == [("b", Phase.CANCELLED)]
    state = end(apply(stopping, p), Unit("a"), Phase.CANCELLED)
    p = plan(graph, state)
    assert started(p) == ["z"]
    state = end(apply(state, p), Unit("z"), Phase.SUCCEEDED)
    assert plan(graph, state).phase is RunPhase.CANCELLED


def test_full_example_context_renders_inputs_and_items() -> None:
    from phalanx.spec.loader import load_pipelines

    graph = build_graph(load_pipelines(FULL)[0].spec)
    params = {"lrs": [0.1, 0.2], "threshold": 0.9, "tag": "v1", "dry": False}
    state = apply(RunState(params=params, run_id="r9"), plan(graph, RunState(params=params)))
    state = end(state, Unit("data"), Phase.SUCCEEDED, shards=["s0", "s1"])
    p = plan(graph, state)
    assert started(p) == ["train[0]", "train[1]", "shard[0]", "shard[1]"]  # concurrency 4
    context = base_context(graph, state, Unit("train", 1), item=0.2, has_item=True)
    assert render_value("{{steps.data.outputs.shards}}", context, field="inputs.params.shards") == [
        "s0",
        "s1",
    ]
    assert (
        render_value("lr={{item}} run={{run.id}}", context, field="command[2]") == "lr=0.2 run=r9"
    )


def test_every_unit_phase_has_a_row_and_final_phases_have_no_way_out() -> None:
    assert set(UNIT_TRANSITIONS) == set(Phase)
    for phase in ENDED:
        assert UNIT_TRANSITIONS[phase] == frozenset()
    check_transition(Unit("a"), Phase.PENDING, Phase.RUNNING)
    with pytest.raises(IllegalTransition, match=r"unit a\[2\]: Succeeded -> Running"):
        check_transition(Unit("a", 2), Phase.SUCCEEDED, Phase.RUNNING)


def legal(before: RunState, after: RunState) -> RunState:
    """``after``, having checked that every phase change is in the transition table."""
    for unit, phase in after.phases.items():
        old = before.phase(unit)
        if phase is not old:
            check_transition(unit, old, phase)
    return after


# ---------------------------------------------------------------------------------------
# Invariants over random pipelines driven by random events.


@st.composite
def pipelines(draw: st.DrawFn) -> Graph:
    count = draw(st.integers(1, 7))
    steps: dict[str, Any] = {}
    for i in range(count):
        fields: dict[str, Any] = {}
        deps = draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=3, unique=True)) if i else []
        if deps:
            fields["dependsOn"] = [f"s{d}" for d in deps]
        if draw(st.booleans()):
            fields["when"] = draw(st.sampled_from(["true", "false", "{{params.flag}}"]))
        if draw(st.integers(0, 3)) == 0:
            items = draw(st.integers(0, 5))
            fields["foreach"] = {"items": list(range(items)), "maxItems": 5}
            if draw(st.booleans()):
                fields["foreach"]["maxParallel"] = draw(st.integers(1, 3))
        steps[f"s{i}"] = step(**fields)
    final = {f"f{i}": step() for i in range(draw(st.integers(0, 2)))}
    spec: dict[str, Any] = {"onFailure": draw(st.sampled_from(["failFast", "continue"]))}
    spec["params"] = {"flag": True}
    if final:
        spec["finally"] = final
    if draw(st.booleans()):
        spec["concurrency"] = draw(st.integers(1, 3))
    return graph_of(steps, **spec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=pipelines(), data=st.data())
def test_invariants_of_any_run(graph: Graph, data: st.DataObject) -> None:
    state = RunState(params={"flag": data.draw(st.booleans(), label="flag")})
    starts: dict[Unit, int] = {}
    failed_before = False
    for _ in range(500):
        p = plan(graph, state)
        decided = apply(state, Plan(expand=p.expand, settle=p.settle))  # what the plan settles
        normal_all_ended = True
        for s in p.start:
            starts[s.unit] = starts.get(s.unit, 0) + 1
            node = graph.node(s.unit.step)
            if node.final:
                # finally starts only once every normal step has ended
                assert all(step_phase(graph, decided, n) in ENDED for n in graph.order)
            else:
                normal_all_ended = False
                # never before its dependencies all succeeded
                assert all(step_phase(graph, decided, d) in DONE for d in node.depends_on)
                assert not state.stopping, "no normal step starts after a stop"
                assert not (failed_before and graph.on_failure == "failFast")
        assert normal_all_ended or not any(graph.node(s.unit.step).final for s in p.start)
        for settle in p.settle:
            assert settle.unit not in starts and settle.reason
        state = legal(state, apply(state, p))
        running = [u for u, ph in state.phases.items() if ph is Phase.RUNNING]
        if graph.concurrency is not None:
            assert len(running) <= graph.concurrency
        for name, node in graph.steps.items():
            if node.foreach and node.foreach.max_parallel:
                assert sum(u.step == name for u in running) <= node.foreach.max_parallel
        if p.finished:
            break
        if not running:
            assert p.start or p.settle or p.expand, "a run that is not finished must progress"
            continue
        if not state.stopping and data.draw(st.integers(0, 9), label="stop?") == 0:
            state = RunState(
                params=state.params, phases=state.phases, expanded=state.expanded, stopping=True
            )
            continue
        unit = data.draw(st.sampled_from(sorted(running)), label="ends")
        outcome = data.draw(st.sampled_from([Phase.SUCCEEDED, Phase.FAILED, Phase.CACHED]))
        if state.stopping and unit.step in graph.steps:
            outcome = Phase.CANCELLED
        failed_before = failed_before or (outcome is Phase.FAILED and unit.step in graph.steps)
        state = legal(state, end(state, unit, outcome))
    else:
        raise AssertionError("the run never finished")
    # every unit started at most once; every finally step ran (or was settled) exactly once
    assert all(n == 1 for n in starts.values())
    for name in graph.final:
        assert starts.get(Unit(name), 0) == 1
    phases = [step_phase(graph, state, n) for n in [*graph.order, *graph.final]]
    assert all(ph in ENDED for ph in phases)
    if state.stopping:
        assert p.phase is RunPhase.CANCELLED
    elif any(ph in (Phase.FAILED, Phase.CANCELLED) for ph in phases):
        assert p.phase is RunPhase.FAILED
    else:
        assert p.phase is RunPhase.SUCCEEDED
    assert plan(graph, state) == Plan(phase=p.phase)  # a finished run stays finished, idle
