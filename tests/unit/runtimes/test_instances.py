"""The instances of a predict request (``phalanx.runtimes.instances``), checked without a
model: what a batch holds, and that each refusal names the first bad entry."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from phalanx.runtimes.instances import (
    BODY_FIX,
    MAX_RANK,
    Batch,
    Refusal,
    parse_body,
    parse_instances,
    shape_text,
    where,
)


def _batch(instances: Any) -> Batch:
    parsed = parse_instances(instances)
    assert isinstance(parsed, Batch), parsed
    return parsed


@pytest.mark.parametrize(
    "instances",
    [
        [[1, 2.5, -3], [4, 5, 6]],
        [7, 8.0],
        [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]],
        [[1e38, -1e-45, 0]],
    ],
)
def test_a_batch_holds_every_number_row_major_with_numpys_shape(instances: Any) -> None:
    batch = _batch(instances)
    array = np.asarray(instances, dtype=float)
    assert batch.shape == array.shape
    assert batch.values == array.ravel().tolist()
    assert all(type(v) is float for v in batch.values)


def test_a_body_is_parsed_from_json_bytes() -> None:
    assert parse_body(b'{"instances": [[1, 2]], "parameters": {}}') == Batch(
        values=[1.0, 2.0], shape=(1, 2)
    )


def _refusal(parsed: Batch | Refusal) -> Refusal:
    assert isinstance(parsed, Refusal), parsed
    assert (parsed.field or "") in parsed.detail
    return parsed


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        (b"", "body", "the body is not JSON"),
        (b"\xff\xfe", "body", "the body is not JSON"),
        (b"[" * 100_000, "body", "the body is not JSON"),
        (b'"instances"', "body", "the body is a string, not an object"),
        (b"{}", "instances", "instances is missing"),
        (b'{"instances": {"a": 1}}', "instances", "instances is an object, not a list"),
        (b'{"instances": []}', "instances", "instances is empty"),
        (b'{"instances": [[]]}', "instances[0]", "instances[0] is an empty list"),
        (b'{"instances": [[1], []]}', "instances[1]", "has 0 entries, but instances[0] has 1"),
        (b'{"instances": [[[1, 2]], [[1, 2], [3, 4]]]}', "instances[1]", "has 2 entries"),
        (b'{"instances": [[[1, 2]], [[1, 2, 3]]]}', "instances[1][0]", "has 3 entries"),
        (b'{"instances": [[1, 2], [3, [4]]]}', "instances[1][1]", "is a list, but"),
        (b'{"instances": [[1, 2], [3, false]]}', "instances[1][1]", "false, not a number"),
        (b'{"instances": [1, -Infinity]}', "instances[1]", "is -inf, not a finite float32"),
        (b'{"instances": [1, 1' + b"0" * 400 + b"]}", "instances[1]", "not a finite float32"),
        (b'{"instances": [3.5e38]}', "instances[0]", "not a finite float32"),
    ],
)
def test_each_refusal_names_the_first_bad_entry(body: bytes, field: str, detail: str) -> None:
    refusal = _refusal(parse_body(body))
    assert (refusal.status, refusal.field) == (400, field)
    assert detail in refusal.detail
    assert refusal.fix
    assert set(refusal.body()) == {"detail", "field", "fix"}


def test_too_many_instances_are_413() -> None:
    refusal = _refusal(parse_instances([[1.0]] * 4, limit=3))
    assert (refusal.status, refusal.field) == (413, "instances")
    assert refusal.fix == "send at most 3 instances per request"
    assert isinstance(parse_instances([[1.0]] * 3, limit=3), Batch)


def test_instances_nested_past_the_rank_limit_are_refused() -> None:
    deep: Any = 1.0
    for _ in range(MAX_RANK):
        deep = [deep]
    assert _batch([deep]).shape == (1,) + (1,) * MAX_RANK
    refusal = _refusal(parse_instances([[deep]]))
    assert refusal.field == "instances" and f"deeper than {MAX_RANK}" in refusal.detail


def test_ragged_rows_say_the_shape_to_send() -> None:
    refusal = _refusal(parse_body(json.dumps({"instances": [[1, 2, 3], [4, 5]]}).encode()))
    assert refusal.fix == "give every instance the same shape: rows of 3 numbers"
    assert _refusal(parse_body(b"nope")).fix == BODY_FIX


def test_where_names_an_entry_by_its_indexes_and_shapes_read_as_a_fix_says_them() -> None:
    assert where(0, (4,)) == "instances[0]"
    assert where(5, (2, 3)) == "instances[1][2]"
    assert where(23, (2, 3, 4)) == "instances[1][2][3]"
    assert shape_text(()) == "one number per instance"
    assert shape_text((8,)) == "rows of 8 numbers"
    assert shape_text((3, 2)) == "instances of shape [3, 2]"
