"""Search spaces: every bad parameter refused naming it and the fix; the grid is the
whole product; values go to optuna's terms and back unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.space import (
    Parameter,
    Space,
    distributions,
    from_optuna,
    grid,
    grid_size,
    parse_space,
    to_optuna,
    values_of,
)


def space() -> Space:
    return parse_space(
        [
            {"name": "cpu", "category": "resources", "kind": "discrete", "values": ["2", "500m", 1]},
            {"name": "memory", "category": "resources", "kind": "int", "low": "1Gi",
             "high": "4Gi", "step": "1Gi"},
            {"name": "THREADS", "category": "env", "kind": "int", "low": 1, "high": 8, "step": 7},
            {"name": "ratio", "category": "args", "kind": "float", "low": 0.1, "high": 0.3,
             "step": 0.1},
            {"name": "dtype", "category": "args", "kind": "categorical",
             "values": ["fp16", "bf16", None]},
        ]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "field", "says"),
    [
        ({"kind": "discrete", "values": []}, "parameters.p.values", "no values"),
        ({"kind": "categorical", "values": ["a", "a"]}, "parameters.p.values", "same value"),
        ({"kind": "discrete", "values": [1, 1.0]}, "parameters.p.values", "same value"),
        ({"kind": "discrete", "values": ["x"]}, "parameters.p.values[0]", "not a quantity"),
        ({"kind": "int", "low": 5, "high": 2}, "parameters.p.low", "above high"),
        ({"kind": "int", "low": 1}, "parameters.p.high", "missing"),
        ({"kind": "int", "low": 1, "high": 2.5}, "parameters.p.high", "whole number"),
        ({"kind": "int", "low": 1, "high": 10, "step": 4}, "parameters.p.high", "multiple"),
        ({"kind": "float", "low": 0, "high": 1, "log": True}, "parameters.p.low", "log"),
        ({"kind": "float", "low": 1, "high": 2, "step": 0.5, "log": True}, "parameters.p.step",
         "no step"),
        ({"kind": "float", "low": 1, "high": 2, "step": 0}, "parameters.p.step", "positive"),
        ({"kind": "float", "low": 1, "high": 2, "values": [1]}, "parameters.p.values", "not values"),
        ({"kind": "discrete", "values": [1], "low": 0}, "parameters.p.values", "takes values"),
        ({"kind": "int", "low": "1Gi", "high": 2}, "parameters.p.low", "not a number"),
        ({"kind": "ordinal", "values": [1]}, "parameters.p.kind", "unknown kind"),
    ],
)  # fmt: skip
def test_a_bad_parameter_is_refused_naming_it_and_the_fix(
    entry: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_space([{"name": "p", "category": "args", **entry}])
    assert refused.value.field == field and says in refused.value.message
    assert refused.value.fix


@pytest.mark.parametrize(
    ("entry", "field", "says"),
    [
        ({"name": "disk", "category": "resources"}, "parameters.disk.name", "not a resource"),
        ({"name": "cpu", "category": "resources", "values": ["-1"]}, "parameters.cpu.values[0]",
         "negative"),
        ({"name": "cpu", "category": "resources", "values": ["16GB"]},
         "parameters.cpu.values[0]", "not a quantity"),
        ({"name": "1X", "category": "env"}, "parameters.1X.name", "environment variable"),
        ({"name": "p", "category": "flags"}, "parameters.p.category", "unknown category"),
    ],
)  # fmt: skip
def test_names_and_categories_are_checked(entry: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_space([{"kind": "discrete", "values": [1], **entry}])
    assert refused.value.field == field and says in refused.value.message


def test_a_space_refuses_no_parameters_twice_a_name_and_unknown_keys() -> None:
    with pytest.raises(InvalidInput, match="no parameter"):
        Space(())
    one = {"name": "A", "category": "env", "kind": "discrete", "values": [1]}
    with pytest.raises(InvalidInput, match="two parameters are named 'A'"):
        parse_space([one, one])
    with pytest.raises(InvalidInput, match="unknown key choices") as refused:
        parse_space([{**one, "choices": [1]}])
    assert refused.value.field == "parameters[0]"


def test_quantities_are_base_units_and_discrete_values_ascend() -> None:
    s = space()
    cpu, memory = s.parameters[0], s.parameters[1]
    assert cpu.values == ("500m", 1, "2")
    assert (memory.low, memory.high, memory.step) == (2**30, 4 * 2**30, 2**30)
    assert values_of(memory) == [2**30, 2 * 2**30, 3 * 2**30, 4 * 2**30]
    assert values_of(s.parameters[3]) == [0.1, 0.2, 0.3]


def test_the_grid_is_the_whole_product_in_parameter_order() -> None:
    points = grid(space())
    assert len(points) == grid_size(space()) == 3 * 4 * 2 * 3 * 3
    assert points[0] == {
        "cpu": "500m",
        "memory": 2**30,
        "THREADS": 1,
        "ratio": 0.1,
        "dtype": "fp16",
    }
    assert points[-1] == {
        "cpu": "2",
        "memory": 4 * 2**30,
        "THREADS": 8,
        "ratio": 0.3,
        "dtype": None,
    }
    assert len({tuple(p.values()) for p in points}) == len(points)


def test_a_parameter_without_a_step_has_no_grid() -> None:
    s = Space((Parameter(name="lr", category="args", kind="float", low=0.001, high=1, log=True),))
    assert grid_size(s) is None
    with pytest.raises(InvalidInput, match="no grid") as refused:
        grid(s)
    assert refused.value.field == "parameters.lr.step" and "discrete" in (refused.value.fix or "")
    # an int without a step has one: step 1
    assert len(grid(Space((Parameter(name="n", category="args", kind="int", low=1, high=5),)))) == 5


def test_a_grid_over_the_limit_is_refused() -> None:
    with pytest.raises(InvalidInput, match="over 100"):
        grid(space(), limit=100)


def test_every_grid_point_goes_to_optuna_and_back_unchanged() -> None:
    s = space()
    dists = distributions(s)
    for point in grid(s):
        internal = to_optuna(s, point)
        assert all(dists[n]._contains(dists[n].to_internal_repr(v)) for n, v in internal.items())
        assert from_optuna(s, internal) == point
    assert to_optuna(s, grid(s)[0])["cpu"] == 0  # a discrete value is its rank


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cpu": "3"}, "params.cpu"),
        ({"memory": 2**30 + 1}, "params.memory"),
        ({"ratio": 0.25}, "params.ratio"),
        ({"dtype": "fp8"}, "params.dtype"),
        ({"THREADS": True}, "params.THREADS"),
        ({"extra": 1}, "params"),
    ],
)
def test_a_point_outside_the_space_is_refused(change: dict[str, Any], field: str) -> None:
    point = {**grid(space())[0], **change}
    with pytest.raises(InvalidInput) as refused:
        to_optuna(space(), point)
    assert refused.value.field == field


def test_by_category_splits_a_candidate() -> None:
    point = grid(space())[0]
    split = space().by_category(point)
    assert split["resources"] == {"cpu": "500m", "memory": 2**30}
    assert split["env"] == {"THREADS": 1} and set(split["args"]) == {"ratio", "dtype"}


@given(
    low=st.integers(-50, 50),
    steps=st.integers(0, 20),
    step=st.sampled_from([0.1, 0.25, 0.5, 1.0, 2.5]),
    drawn=st.floats(0, 1),
)
def test_a_stepped_float_snaps_to_its_grid(low: int, steps: int, step: float, drawn: float) -> None:
    """What optuna draws (with float noise) comes back as the grid's own value."""
    high = float(low + steps * step) if step != 0.1 else round(low + steps * 0.1, 10)
    p = Parameter(name="x", category="args", kind="float", low=low, high=high, step=step)
    s = Space((p,))
    column = values_of(p)
    value = float(column[round(drawn * (len(column) - 1))])  # type: ignore[arg-type]
    noisy = value + 1e-12
    assert from_optuna(s, {"x": noisy})["x"] == value
    assert to_optuna(s, {"x": value}) == {"x": value}
