"""Quantities parse like Kubernetes; Resources behave as vectors that keep written zeros."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.errors import QuantityError
from phalanx.domain.resources import Resources, canonical_amount, format_amount, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("1.5", 1.5),
        ("2", 2.0),
        ("16Gi", 16 * 2**30),
        ("80G", 80e9),
        ("1e3", 1000.0),
        ("1.5Ki", 1536.0),
        (".5", 0.5),
        (3, 3.0),
        (0.25, 0.25),
    ],
)
def test_quantities_parse_like_kubernetes(text: str | int | float, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["16GB", "abc", "", "-1", "1..2", "nan", "inf", "1 Gi", True])
def test_bad_quantities_name_the_field_and_the_fix(bad: object) -> None:
    with pytest.raises(QuantityError) as error:
        parse_quantity(bad, field="spec.roles[0].resources.memory")  # type: ignore[arg-type]
    assert "spec.roles[0].resources.memory" in str(error.value)
    assert "fix:" in str(error.value)


def test_canonical_units() -> None:
    assert canonical_amount("cpu", "500m") == 500
    assert canonical_amount("cpu", 2) == 2000
    assert canonical_amount("memory", "1Gi") == 2**30
    assert canonical_amount("gpu", "0.5") == 0.5
    assert canonical_amount("rdma/hca", 1) == 1


def test_resource_names_are_checked() -> None:
    with pytest.raises(QuantityError, match="not a resource name"):
        canonical_amount("gpu\x00; rm -rf", 1)


def test_written_zeros_are_kept_but_equal_to_absence() -> None:
    none = Resources.parse({"gpu": 0})
    assert "gpu" in none
    assert none == Resources()
    assert hash(none) == hash(Resources())
    assert none.describe() == "nothing"


def test_vector_arithmetic() -> None:
    a = Resources.parse({"cpu": "2", "gpu": 1})
    b = Resources.parse({"cpu": "500m", "memory": "1Gi"})
    assert (a + b)["cpu"] == 2500
    assert (a - a) == Resources()
    assert "cpu" not in (a - a)
    assert a.scaled(2)["gpu"] == 2
    assert b.fits_in(a + b)
    assert not (a + b).fits_in(a)
    assert a.describe() == "cpu=2, gpu=1"


def test_people_format() -> None:
    assert format_amount("memory", 16 * 2**30) == "16Gi"
    assert format_amount("cpu", 500) == "500m"
    assert format_amount("cpu", 8000) == "8"
    assert format_amount("gpu", float("inf")) == "unlimited"


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi"]))
def test_integer_quantities_round_trip_through_their_suffix(number: int, suffix: str) -> None:
    scale = {"": 1, "m": 1e-3, "k": 1e3, "Ki": 1024, "Mi": 2**20, "Gi": 2**30}[suffix]
    assert parse_quantity(f"{number}{suffix}") == pytest.approx(number * scale)


def test_spoken_resources_use_the_units_people_write_gpus_first() -> None:
    asked = Resources.of({"cpu": 2000, "memory": 32 * 2**30, "gpu": 8, "rdma/hca": 1})
    assert asked.spoken() == "8 GPUs, 2 CPUs, 32Gi memory and 1 rdma/hca"
    assert Resources.of({"cpu": 500, "gpu": 1}).spoken() == "1 GPU and 500m CPU"
    assert Resources.of({"gpu": 0.5}).spoken() == "0.5 GPU"
    assert Resources().spoken() == "nothing"
