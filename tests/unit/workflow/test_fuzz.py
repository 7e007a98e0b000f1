"""Any mutation of a valid document either loads into a working graph or is refused with
a DocumentError: nothing else escapes."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import DocumentError
from phalanx.spec.loader import build_pipeline, load_pipelines
from phalanx.spec.pipeline.dag import build_graph
from phalanx.workflow.planner import RunState, plan
from tests.unit.workflow.examples import FULL, TRI

BASES = [yaml.safe_load(FULL), yaml.safe_load(TRI)]

ODD_STRINGS = st.sampled_from(
    [
        "{{params.lrs}}",
        "{{steps.data.outputs.shards}}",
        "{{item}}",
        "{{item.name}}",
        "{{outputs.model}}",
        "{{inputs.data}}",
        "{{run.id}}",
        "{{ params.tag | json }}",
        "{{",
        "}}",
        "; rm -rf /",
        "0 3 * * *",
        "1h",
        "x" * 70_000,
        "",
        "\x00",
        "true and {{params.dry}}",
    ]
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=10)
    | ODD_STRINGS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=8) | ODD_STRINGS, children, max_size=3)
    ),
    max_leaves=6,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += paths(value, (*prefix, i))
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_documents_load_or_are_refused(data: st.DataObject) -> None:
    document = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(paths(document)[1:]))
        parent = document
        for key in where[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = data.draw(VALUES)
    try:
        pipeline = build_pipeline(document)
    except DocumentError as error:
        assert error.fix and str(error).startswith("<request> document 1")
        return
    graph = build_graph(pipeline.spec)
    assert load_pipelines(pipeline.to_yaml())[0] == pipeline
    params = {p.name: p.default for p in graph.params}
    plan(graph, RunState(params=params))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_outputs_give_a_plan_never_an_exception(data: st.DataObject) -> None:
    from phalanx.workflow.planner import Phase, Unit, apply

    graph = build_graph(load_pipelines(FULL)[0].spec)
    params = {"lrs": data.draw(st.lists(st.floats(0, 1), max_size=3)), "threshold": 0.9}
    params |= {"tag": "v1", "dry": data.draw(st.booleans())}
    state = apply(RunState(params=params), plan(graph, RunState(params=params)))
    outputs = {Unit("data"): {"shards": data.draw(VALUES)}}
    phases = {**state.phases, Unit("data"): Phase.SUCCEEDED}
    for _ in range(6):
        state = RunState(params=params, phases=phases, outputs=outputs, expanded=state.expanded)
        p = plan(graph, state)
        state = apply(state, p)
        phases = dict(state.phases)
        for start in p.start:
            phases[start.unit] = Phase.SUCCEEDED
            outputs[start.unit] = {"score": data.draw(VALUES), "accuracy": data.draw(VALUES)}
        for settle in p.settle:
            assert settle.reason
