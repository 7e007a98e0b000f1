"""The graph: any set of dependencies is either ordered or refused naming a real cycle."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import DocumentError
from phalanx.spec.loader import build_pipeline
from phalanx.spec.pipeline.dag import build_graph


def document(edges: dict[str, list[str]], *, implied: bool = False) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    for name, deps in edges.items():
        step: dict[str, Any] = {"command": ["run", name], "outputs": {"artifacts": ["out"]}}
        if implied:  # dependencies through references instead of dependsOn
            step["command"] += [f"{{{{steps.{d}.outputs.out}}}}" for d in deps]
        else:
            step["dependsOn"] = deps
        steps[name] = step
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "g"},
        "spec": {"defaults": {"resources": {"cpu": 1}}, "steps": steps},
    }


def has_cycle(edges: dict[str, list[str]]) -> bool:
    state: dict[str, int] = {}

    def visit(node: str) -> bool:
        state[node] = 1
        for dep in edges[node]:
            if state.get(dep) == 1 or (dep not in state and visit(dep)):
                return True
        state[node] = 2
        return False

    return any(node not in state and visit(node) for node in edges)


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    names = [f"s{i}" for i in range(draw(st.integers(1, 8)))]
    return {
        name: draw(
            st.lists(
                st.sampled_from([n for n in names if n != name] or [name]), max_size=3, unique=True
            )
        )
        if len(names) > 1
        else []
        for name in names
    }


@settings(max_examples=150, deadline=None)
@given(graphs(), st.booleans())
def test_any_dependencies_are_ordered_or_refused_with_a_real_cycle(
    edges: dict[str, list[str]], implied: bool
) -> None:
    if has_cycle(edges):
        with pytest.raises(DocumentError, match="steps depend on each other in a cycle") as info:
            build_pipeline(document(edges, implied=implied))
        cycle = re.search(r"cycle: ([a-z0-9 >-]+);", str(info.value))
        assert cycle is not None
        names = cycle[1].split(" -> ")
        assert names[0] == names[-1]
        for step, dep in itertools.pairwise(names):
            assert dep in edges[step], (step, dep)
        return
    graph = build_graph(build_pipeline(document(edges, implied=implied)).spec)
    position = {name: i for i, name in enumerate(graph.order)}
    assert sorted(graph.order) == sorted(edges)
    for name, deps in edges.items():
        assert set(graph.steps[name].depends_on) == set(deps)
        assert all(position[d] < position[name] for d in deps)
        assert graph.downstream(name) >= {n for n, ds in edges.items() if name in ds}
    assert build_graph(build_pipeline(document(edges, implied=implied)).spec).order == graph.order


def test_a_thousand_steps_in_a_chain_are_ordered() -> None:
    edges = {f"s{i}": [f"s{i - 1}"] if i else [] for i in range(1000)}
    graph = build_graph(build_pipeline(document(edges)).spec)
    assert graph.order == tuple(edges)
    assert len(graph.downstream("s0")) == 999


def test_more_than_a_thousand_steps_are_refused() -> None:
    edges: dict[str, list[str]] = {f"s{i}": [] for i in range(1001)}
    with pytest.raises(
        DocumentError, match=r"spec\.steps: 1001 entries is more than the limit of 1000; fix: split"
    ):
        build_pipeline(document(edges))
