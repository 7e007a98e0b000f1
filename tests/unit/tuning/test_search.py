"""The search: each sampler proposes points of the space, the same ones for a seed; a
point is measured once (repeats and failures are answered from the record); restore
rebuilds a study whose best is the same."""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.search import GP_NEEDS, Search, TrialRecord
from phalanx.tuning.space import Parameter, Space, grid, parse_space, to_optuna

GP_MISSING = [m for m in GP_NEEDS if importlib.util.find_spec(m) is None]
NEEDS_GP = pytest.mark.skipif(
    bool(GP_MISSING),
    reason=f"no {' and '.join(GP_MISSING)}: the gp sampler needs scipy and torch "
    "(pip install scipy torch)",
)


def space() -> Space:
    return parse_space(
        [
            {"name": "cpu", "category": "resources", "kind": "discrete",
             "values": ["500m", "1", "2", "4"]},
            {"name": "BATCH", "category": "env", "kind": "int", "low": 1, "high": 16, "step": 5},
            {"name": "mode", "category": "args", "kind": "categorical", "values": ["a", "b"]},
        ]
    )  # fmt: skip


def cost(params: dict[str, Any]) -> float:
    """A made-up objective, lowest at cpu 1, BATCH 11, mode b."""
    cpu = {"500m": 3.0, "1": 1.0, "2": 2.0, "4": 4.0}[params["cpu"]]
    return cpu + abs(int(params["BATCH"]) - 11) / 5 + (0.0 if params["mode"] == "b" else 0.5)


def run(search: Search, asks: int) -> list[tuple[Any, ...]]:
    """Ask ``asks`` times, measuring each new point with ``cost``; the points proposed."""
    proposed = []
    for _ in range(asks):
        proposal = search.ask()
        proposed.append(tuple(proposal.params.values()))
        if proposal.measure:
            search.tell(proposal.number, cost(dict(proposal.params)))
    return proposed


@pytest.mark.parametrize("sampler", ["tpe", "random", "grid"])
def test_each_sampler_proposes_valid_points_the_same_for_a_seed(sampler: Any) -> None:
    first = run(Search(space(), sampler=sampler, seed=5, startup_trials=4), 14)
    assert first == run(Search(space(), sampler=sampler, seed=5, startup_trials=4), 14)
    assert first != run(Search(space(), sampler=sampler, seed=6, startup_trials=4), 14)
    for point in first:
        to_optuna(space(), dict(zip(space().names, point, strict=True)))


@NEEDS_GP
@pytest.mark.slow  # torch loads: about 7 s on two cores
def test_the_gp_sampler_proposes_valid_points_the_same_for_a_seed() -> None:
    first = run(Search(space(), sampler="gp", seed=5, startup_trials=3), 6)
    assert first == run(Search(space(), sampler="gp", seed=5, startup_trials=3), 6)
    for point in first:
        to_optuna(space(), dict(zip(space().names, point, strict=True)))


def test_gp_without_its_dependencies_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "scipy" else real(name, *a),
    )
    with pytest.raises(InvalidInput) as refused:
        Search(space(), sampler="gp")
    assert refused.value.field == "sampler" and "scipy" in refused.value.message
    assert "pip install scipy torch" in (refused.value.fix or "")


def test_the_grid_sampler_measures_every_point_once_then_is_exhausted() -> None:
    search = Search(space(), sampler="grid", seed=1)
    measured = []
    while not search.exhausted:
        proposal = search.ask()
        assert proposal.measure
        measured.append(tuple(proposal.params.values()))
        search.tell(proposal.number, cost(dict(proposal.params)))
    assert sorted(measured, key=repr) == sorted(
        (tuple(p.values()) for p in grid(space())), key=repr
    )
    best = search.best()
    assert best is not None and best.params == {"cpu": "1", "BATCH": 11, "mode": "b"}
    assert best.value == 1.0


def test_a_repeated_point_is_answered_from_its_record_not_measured_again() -> None:
    tiny = Space((Parameter(name="N", category="env", kind="discrete", values=(1, 2)),))
    search = Search(tiny, sampler="random", seed=0)
    told: dict[Any, float] = {}
    repeats = 0
    for _ in range(12):
        proposal = search.ask()
        n = proposal.params["N"]
        if proposal.measure:
            assert n not in told, "a point measured twice"
            told[n] = float(n)
            search.tell(proposal.number, float(n))
        else:
            repeats += 1
            assert proposal.value == told[n]
            assert search.records()[-1].repeat_of == proposal.repeat_of
    assert repeats == 10 and search.exhausted


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_failed_point_is_recorded_and_never_measured_again(sampler: Any) -> None:
    """Points with cpu 4 cannot be placed: each is tried once, told as failed, and the
    search goes on to the rest instead of coming back to them forever."""
    search = Search(space(), sampler=sampler, seed=2, startup_trials=4)
    measured: list[tuple[Any, ...]] = []
    for _ in range(80):
        proposal = search.ask()
        if not proposal.measure:
            continue
        measured.append(tuple(proposal.params.values()))
        if proposal.params["cpu"] == "4":
            record = search.tell(proposal.number, None, reason="no node has 4 cores free")
            assert record.state == "failed" and record.reason == "no node has 4 cores free"
        else:
            search.tell(proposal.number, cost(dict(proposal.params)))
    assert len(measured) == len(set(measured))  # no point measured twice
    assert len(measured) >= 12  # and the search kept finding new ones
    failed = [r for r in search.records() if r.state == "failed"]
    assert failed and all(r.params["cpu"] == "4" for r in failed)
    assert len([r for r in failed if r.repeat_of is None]) == sum(m[0] == "4" for m in measured)
    trials = search._study.get_trials(deepcopy=False)
    assert sum(t.state.name == "FAIL" for t in trials) == len(failed)
    best = search.best()
    assert best is not None and best.params["cpu"] != "4"


def test_a_trial_is_told_once_with_a_finite_value() -> None:
    search = Search(space())
    proposal = search.ask()
    with pytest.raises(InvalidInput, match="not a finite value"):
        search.tell(proposal.number, math.nan)
    search.tell(proposal.number, 1.0)
    with pytest.raises(InvalidInput, match="already told"):
        search.tell(proposal.number, 2.0)
    with pytest.raises(InvalidInput, match="never proposed"):
        search.tell(99, 2.0)
    assert search.pending == ()


def test_restore_rebuilds_the_study_and_numbers_go_on() -> None:
    before = Search(space(), direction="maximize", sampler="tpe", seed=3, startup_trials=4)
    run(before, 12)
    proposal = before.ask()
    while not proposal.measure:
        proposal = before.ask()
    before.tell(proposal.number, None, "failed", reason="crashed")
    records = [TrialRecord.from_dict(r.to_dict()) for r in before.records()]

    after = Search(space(), direction="maximize", sampler="tpe", seed=3, startup_trials=4)
    after.restore(reversed(records))
    assert after.best() == before.best() and after.records() == before.records()
    assert [t.state for t in after._study.trials] == [t.state for t in before._study.trials]
    assert after.ask().number == records[-1].number + 1
    with pytest.raises(InvalidInput, match="has trials already"):
        after.restore(records)


def test_restore_refuses_a_record_outside_the_space() -> None:
    bad = TrialRecord(
        number=4, params={"cpu": "8", "BATCH": 1, "mode": "a"}, state="complete", value=1.0
    )
    with pytest.raises(InvalidInput) as refused:
        Search(space()).restore([bad])
    assert refused.value.field == "records[4].params.cpu"
    with pytest.raises(InvalidInput, match="two records"):
        Search(space()).restore([bad, bad])
    no_value = TrialRecord(number=0, params=grid(space())[0], state="complete")
    with pytest.raises(InvalidInput, match="complete trial with value None"):
        Search(space()).restore([no_value])


def test_best_follows_the_direction_and_takes_the_earliest_of_equals() -> None:
    for direction, expected in (("minimize", 0), ("maximize", 1)):
        search = Search(space(), direction=direction, sampler="grid", seed=0)  # type: ignore[arg-type]
        for value in (1.0, 3.0, 1.0, 3.0):
            search.tell(search.ask().number, value)
        best = search.best()
        assert best is not None and best.number == expected


@pytest.mark.parametrize(
    ("options", "field"),
    [({"sampler": "cmaes"}, "sampler"), ({"direction": "up"}, "direction")],
)
def test_unknown_samplers_and_directions_are_refused(options: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        Search(space(), **options)
    assert refused.value.field == field


def test_the_grid_sampler_refuses_a_space_without_a_grid() -> None:
    continuous = Space((Parameter(name="lr", category="args", kind="float", low=0.1, high=1),))
    with pytest.raises(InvalidInput, match="no grid"):
        Search(continuous, sampler="grid")
    assert Search(continuous, sampler="tpe").ask().measure
