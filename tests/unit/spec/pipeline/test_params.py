"""Parameters: what ``-p key=value`` reads is what a template writes back."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline.params import Param, ParamType, parse_text, resolve, type_of
from phalanx.spec.pipeline.templates import to_text

VALUES: dict[ParamType, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=30),
    "int": st.integers(-(10**18), 10**18),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "bool": st.booleans(),
    "list": st.lists(st.integers() | st.text(max_size=5) | st.booleans(), max_size=5),
}


@pytest.mark.parametrize("kind", list(VALUES))
@given(data=st.data())
def test_a_value_written_by_a_template_reads_back_as_itself(
    kind: ParamType, data: st.DataObject
) -> None:
    value = data.draw(VALUES[kind])
    assert type_of(value) == kind or (kind == "float" and isinstance(value, float))
    assert parse_text(to_text(value), kind) == value


def test_required_and_typed_overrides() -> None:
    declared = [Param(name="n", type="int"), Param(name="f", type="float", default=0.5)]
    assert resolve(declared, {"n": "3"}) == {"n": 3, "f": 0.5}
    assert resolve(declared, {"n": 3, "f": 2}) == {"n": 3, "f": 2.0}
    with pytest.raises(InvalidInput, match=r"params\.n: '3\.5' is not an int"):
        resolve(declared, {"n": "3.5"})
    with pytest.raises(InvalidInput, match=r"params\.n: is required.*-p n=VALUE"):
        resolve(declared, {})
    for text in ("NaN", "Infinity", "-Infinity", "1e999"):
        with pytest.raises(InvalidInput, match=rf"params\.f: '{text}' is not a float"):
            resolve(declared, {"n": 1, "f": text})
    with pytest.raises(InvalidInput, match=r"params\.f: 'NaN' is not a float"):
        resolve(declared, {"n": 1, "f": float("nan")})
    with pytest.raises(InvalidInput, match=r"params\.n: 'true' is not an int"):
        resolve(declared, {"n": True})
    with pytest.raises(
        InvalidInput, match=r"'x' is not a parameter of this pipeline; fix: use one of: f, n"
    ):
        resolve(declared, {"n": 1, "x": 1})
