"""The workflow controller's record of a run: JSON round trips and the planner's view."""

from __future__ import annotations

import json

import pytest

from phalanx.control.controllers.runs import (
    AttemptEnd,
    RunRecord,
    UnitRecord,
    resumed_record,
    retry_or_fail,
    unit_of,
)
from phalanx.domain.errors import InvalidInput
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline import build_graph
from phalanx.spec.pipeline.parts import FailureCause, RetrySpec
from phalanx.workflow import Phase, Unit


def test_a_record_survives_json_and_gives_the_planner_its_phases_and_outputs() -> None:
    record = RunRecord(
        units={
            Unit("prep"): UnitRecord(
                phase=Phase.SUCCEEDED,
                attempt=1,
                job="r-prep-1",
                outputs={"rows": 3, "data": "/w/runs/r/prep/data"},
                started_at=1.0,
                finished_at=2.0,
            ),
            Unit("each", 12): UnitRecord(
                phase=Phase.RUNNING, attempt=2, job="r-each-12-2", retry_at=9.5, reason="x"
            ),
        },
        expanded={"each": 20},
    )
    again = RunRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record
    state = again.state(run_id="r", params={"lr": 0.1}, stopping=True)
    assert state.phases == {Unit("prep"): Phase.SUCCEEDED, Unit("each", 12): Phase.RUNNING}
    assert state.outputs == {Unit("prep"): {"rows": 3, "data": "/w/runs/r/prep/data"}}
    assert state.expanded == {"each": 20} and state.stopping and state.run_id == "r"
    assert RunRecord.from_json({}) == RunRecord()


@pytest.mark.parametrize("unit", [Unit("train"), Unit("train", 0), Unit("a-b", 9999)])
def test_unit_keys_read_back(unit: Unit) -> None:
    assert unit_of(str(unit)) == unit


@pytest.mark.parametrize("key", ["", "a[", "a[x]", "a[1]b"])
def test_a_bad_unit_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="is not a unit"):
        unit_of(key)


TRI = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: tri}
spec:
  params: {lr: 0.01}
  defaults: {queue: wf, resources: {cpu: 1}}
  steps:
    prep: {command: "echo > {{outputs.data}}", outputs: {artifacts: [data]}}
    train:
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: "echo {{params.lr}} > {{outputs.model}}"
      outputs: {artifacts: [model]}
    validate: {command: "cat {{steps.train.outputs.model}}"}
"""


def _failed_tri() -> RunRecord:
    def done(step: str, name: str) -> UnitRecord:
        return UnitRecord(
            phase=Phase.SUCCEEDED,
            attempt=1,
            job=f"old-{step}-1",
            outputs={name: f"/w/runs/old/{step}/{name}"},
            started_at=1.0,
            finished_at=2.0,
        )

    return RunRecord(
        units={
            Unit("prep"): done("prep", "data"),
            Unit("train"): done("train", "model"),
            Unit("validate"): UnitRecord(phase=Phase.FAILED, attempt=1, job="old-validate-1"),
        }
    )


def test_a_resumed_record_reuses_the_done_steps_with_their_outputs_and_jobs() -> None:
    graph = build_graph(load_pipelines(TRI)[0].spec)
    record = resumed_record(
        graph,
        _failed_tri(),
        previous_id="old",
        previous_params={"lr": 0.01},
        params={"lr": 0.01},
        run_id="new",
    )
    assert set(record.units) == {Unit("prep"), Unit("train")}  # validate: Pending
    train = record.units[Unit("train")]
    assert train.phase is Phase.CACHED and train.reason == "reused from run old"
    assert train.outputs == {"model": "/w/runs/old/train/model"}  # the old run's artifact
    assert (train.job, train.attempt, train.finished_at) == ("old-train-1", 1, 2.0)
    assert RunRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def _resume(lr: float, from_step: str | None = None) -> set[Unit]:
    graph = build_graph(load_pipelines(TRI)[0].spec)
    record = resumed_record(
        graph,
        _failed_tri(),
        previous_id="old",
        previous_params={"lr": 0.01},
        params={"lr": lr},
        run_id="new",
        from_step=from_step,
    )
    return set(record.units)


def test_from_a_step_or_a_changed_param_reruns_it_and_its_downstream() -> None:
    assert _resume(0.01, from_step="train") == {Unit("prep")}
    assert _resume(0.5) == {Unit("prep")}  # train reads lr: it and validate run again
    assert _resume(0.01, from_step="prep") == set()
    with pytest.raises(InvalidInput, match="'tune' is not a step"):
        _resume(0.01, from_step="tune")


@pytest.mark.parametrize(
    ("cause", "on", "fix"),
    [
        # A cause from outside the step that retry.on leaves out: retrying can help.
        ("preempted", [], "fix: add preempted to the step's retry.on to retry it"),
        ("nodeLost", ["preempted"], "fix: add nodeLost to the step's retry.on to retry it"),
        # The step's own failure (a directory it cannot write, say): its log, not a retry.
        ("failed", [], "fix: see what it said: phalanx logs r-prep-1 --stderr"),
        ("failed", ["failed"], "fix: see what it said: phalanx logs r-prep-1 --stderr"),
    ],
)
def test_a_failed_unit_is_offered_only_the_fix_that_can_help(
    cause: FailureCause, on: list[FailureCause], fix: str
) -> None:
    record = UnitRecord(phase=Phase.RUNNING, attempt=1, job="r-prep-1")
    ended = AttemptEnd(
        cause=cause, why="it ended", at=5.0, shown_by="phalanx logs r-prep-1 --stderr"
    )
    retry = RetrySpec.model_validate({"on": on, "maxAttempts": 1})
    retry_or_fail(retry, Unit("prep"), record, ended, stopping=False, now=9)
    assert record.phase is Phase.FAILED and record.reason == f"it ended; {fix}"
    assert record.finished_at == 5.0
