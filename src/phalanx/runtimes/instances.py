"""The instances of a KServe V1 predict request, checked before any model sees them.

Pure: no torch, no I/O. ``parse_body`` turns a request body into a ``Batch`` (every
number, row-major, and the batch's shape) or a ``Refusal`` (an HTTP status and the JSON
``{detail, field, fix}`` a person can act on). Guarantees of a ``Batch``: at least one
and at most ``limit`` instances, all of one shape (a number, or nested lists of at most
``MAX_RANK`` levels, no list empty), every value a finite number within float32's range
(``true``/``false``, strings, null, NaN and Infinity are refused). A refusal names the
first offending entry as a field such as ``instances[3][1]``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

#: The most instances one request may carry (more: 413).
MAX_INSTANCES: Final = 10_000
#: The most dimensions one instance may have.
MAX_RANK: Final = 8
#: The largest magnitude a float32 holds.
FLOAT32_MAX: Final = 3.4028234663852886e38
#: What to send instead of a body that is not what the protocol asks.
BODY_FIX: Final = 'send a JSON object such as {"instances": [[1.0, 2.0], [3.0, 4.0]]}'


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A request not served: its HTTP status and why, as ``{detail, field, fix}``."""

    status: int
    detail: str
    field: str | None
    fix: str

    def body(self) -> dict[str, Any]:
        """The JSON answer."""
        return {"detail": self.detail, "field": self.field, "fix": self.fix}


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Checked instances: every number, row-major, and the shape, the instance count first."""

    values: list[float]
    shape: tuple[int, ...]


def parse_body(raw: bytes, *, limit: int = MAX_INSTANCES) -> Batch | Refusal:
    """The instances of a predict request's body, or why they are refused."""
    try:
        body = json.loads(raw, parse_constant=float)  # NaN and Infinity: refused below
    except (ValueError, RecursionError) as error:
        return Refusal(
            status=400, detail=f"the body is not JSON ({error})", field="body", fix=BODY_FIX
        )
    if not isinstance(body, dict):
        detail = f"the body is {kind(body)}, not an object"
        return Refusal(status=400, detail=detail, field="body", fix=BODY_FIX)
    if "instances" not in body:
        return bad("instances", "is missing", BODY_FIX)
    return parse_instances(body["instances"], limit=limit)


def parse_instances(instances: object, *, limit: int = MAX_INSTANCES) -> Batch | Refusal:
    """``instances`` as a batch: a non-empty list of at most ``limit`` numbers or equally
    shaped nested lists of numbers; else the refusal naming the first bad entry."""
    if not isinstance(instances, list):
        return bad("instances", f"is {kind(instances)}, not a list", BODY_FIX)
    if not instances:
        return bad("instances", "is empty", "send at least one instance")
    if len(instances) > limit:
        detail = f"holds {len(instances)} instances, more than the {limit} one request may carry"
        return bad("instances", detail, f"send at most {limit} instances per request", status=413)
    shape = [len(instances)]
    level: list[Any] = instances  # every entry at this depth, row-major
    while isinstance(level[0], list):
        width = len(level[0])
        for index, entry in enumerate(level):
            if not isinstance(entry, list) or len(entry) != width:
                found = (
                    f"has {len(entry)} entries" if isinstance(entry, list) else f"is {kind(entry)}"
                )
                return bad(
                    where(index, shape),
                    f"{found}, but {where(0, shape)} has {width}",
                    f"give every instance the same shape: {shape_text([*shape[1:], width])}",
                )
        if width == 0:
            return bad(where(0, shape), "is an empty list", "give each list at least one number")
        if len(shape) > MAX_RANK:
            return bad("instances", f"nest deeper than {MAX_RANK} levels", "send flatter instances")
        shape.append(width)
        level = [item for entry in level for item in entry]
    return _numbers(level, tuple(shape))


def _numbers(level: list[Any], shape: tuple[int, ...]) -> Batch | Refusal:
    values: list[float] = []
    for index, entry in enumerate(level):
        if isinstance(entry, list):
            return bad(
                where(index, shape),
                f"is a list, but {where(0, shape)} is a number",
                f"give every instance the same shape: {shape_text(shape[1:])}",
            )
        if isinstance(entry, bool) or not isinstance(entry, int | float):
            return bad(where(index, shape), f"is {kind(entry)}, not a number", "send numbers")
        try:
            number = float(entry)
        except OverflowError:  # an integer beyond any float
            number = math.inf
        if not math.isfinite(number) or abs(number) > FLOAT32_MAX:
            return bad(
                where(index, shape),
                f"is {str(entry)[:40]}, not a finite float32",
                f"send finite numbers within +-{FLOAT32_MAX:.4g}",
            )
        values.append(number)
    return Batch(values=values, shape=shape)


def bad(field: str, detail: str, fix: str, *, status: int = 400) -> Refusal:
    """The refusal of ``field``: its detail starts with the field's name."""
    return Refusal(status=status, detail=f"{field} {detail}", field=field, fix=fix)


def where(index: int, shape: Sequence[int]) -> str:
    """The field of the entry at flat ``index`` of a level whose entries ``shape`` indexes:
    ``where(5, (2, 3)) == "instances[1][2]"``."""
    parts: list[int] = []
    for size in reversed(shape):
        index, rest = divmod(index, size)
        parts.append(rest)
    return "instances" + "".join(f"[{i}]" for i in reversed(parts))


def kind(value: object) -> str:
    """What a JSON value is, in words: ``a string``, ``null`` ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    return "a list" if isinstance(value, list) else "a number"


def shape_text(shape: Sequence[int]) -> str:
    """An instance shape as a fix says it: ``rows of 8 numbers``."""
    if not shape:
        return "one number per instance"
    if len(shape) == 1:
        return f"rows of {shape[0]} numbers"
    return f"instances of shape {list(shape)}"
