"""The workflow controller's record of a run: JSON round trips and the planner's view."""

from __future__ import annotations

import json

import pytest

from phalanx.control.controllers.runs import RunRecord, UnitRecord, unit_of
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
