"""The durations file of a pipeline replay: what it accepts, and each refusal's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.examples.pipelines import DIRECTORY, PIPELINES
from phalanx.sim.pipeline import load_timings, timings_of
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline import Graph, build_graph
from phalanx.workflow import Unit

TEXT = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: p}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}
  steps:
    prep:
      command: "true"
      outputs: {artifacts: [data], params: {rows: {type: int}, note: {type: string}}}
    train:
      command: "echo {{item}} {{steps.prep.outputs.data}}"
      foreach: {items: [1, 2, 3], maxItems: 3}
      outputs: {params: {accuracy: {type: float}}}
    pick:
      when: "{{steps.prep.outputs.rows}} > 10"
      inputs: {params: {scores: "{{steps.train.outputs.accuracy}}"}}
      command: "echo {{inputs.scores}}"
"""


def _graph() -> Graph:
    [document] = load_pipelines(TEXT)
    return build_graph(document.spec)


GOOD: dict[str, Any] = {
    "prep": {"duration": "2m", "outputs": {"rows": 20}},
    "train": {"duration": 60, "outputs": {"accuracy": 0.5}, "failures": 1},
    "train[2]": {"outputs": {"accuracy": 0.9}},
    "train[1]": "90s",
    "pick": 5,
}


def test_items_take_what_they_leave_out_from_their_step() -> None:
    timings = timings_of(GOOD, _graph())
    assert timings.of(Unit("prep")).duration == 120.0
    assert timings.of(Unit("train", 0)).outputs == {"accuracy": 0.5}
    two = timings.of(Unit("train", 2))
    assert (two.duration, two.outputs, two.failures) == (60.0, {"accuracy": 0.9}, 1)
    one = timings.of(Unit("train", 1))
    assert (one.duration, one.outputs, one.failures) == (90.0, {"accuracy": 0.5}, 1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trian": 5}, "trian: is not a step; fix: did you mean 'train'?"),
        ({"pick[0]": 5}, "pick[0]: the step has no foreach; fix: write pick alone"),
        ({"pick": None}, "pick: "),
        ({"pick": {"time": 5}}, "pick.time: is not a field; fix: use duration, outputs, failures"),
        ({"pick": {"outputs": {}}}, "pick.duration: is required"),
        ({"pick": -3}, "pick: "),
        ({"train": {"duration": 5, "failures": -1, "outputs": {"accuracy": 1}}}, "train.failures"),
        (
            {"prep": {"duration": 5, "outputs": {"rows": "many"}}},
            'prep.outputs.rows: "many" is not an int',
        ),
        (
            {"prep": {"duration": 5, "outputs": {"rows": 1, "data": "x"}}},
            "declares no output param 'data'",
        ),
        ({"prep": {"duration": 5}}, "prep.outputs.rows: is read by step pick and not given"),
        ({"train": 5}, "train.outputs.accuracy: is read by step pick and not given"),
    ],
)
def test_bad_entries_are_refused_naming_the_key_and_the_fix(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(DocumentError) as raised:
        timings_of({**GOOD, **change}, _graph(), source="d.yaml")
    assert str(raised.value).startswith("d.yaml: ") and message in str(raised.value)
    assert "fix: " in str(raised.value)


def test_a_step_left_out_is_named() -> None:
    with pytest.raises(DocumentError, match=r"d.yaml: pick: has no duration; fix: add `pick: 5m`"):
        timings_of({k: v for k, v in GOOD.items() if k != "pick"}, _graph(), source="d.yaml")


def test_a_file_that_is_not_a_mapping_or_not_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text("- prep\n- train\n")
    with pytest.raises(DocumentError, match="is not a mapping; fix: map each step"):
        load_timings(path, _graph())
    path.write_text("prep: [unclosed\n")
    with pytest.raises(DocumentError, match="not YAML or JSON"):
        load_timings(path, _graph())
    with pytest.raises(DocumentError, match="cannot be read"):
        load_timings(tmp_path / "missing.yaml", _graph())


@pytest.mark.parametrize("name", PIPELINES)
def test_the_shipped_examples_have_durations_that_load(name: str) -> None:
    [document] = load_pipelines((DIRECTORY / name).read_text())
    graph = build_graph(document.spec)
    timings = load_timings(DIRECTORY / "durations" / name, graph)
    assert set(timings.steps) == {*graph.order, *graph.final}
