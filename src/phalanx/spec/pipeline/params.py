"""Pipeline parameters: their types, and the values a run gets (``-p key=value``).

A parameter is declared by its default (``lr: 0.01`` is a float defaulting to 0.01) or
in full (``lr: {type: float, default: 0.01, description: ...}``; without ``default`` it
must be given at submit). Types: ``string``, ``int``, ``float``, ``bool``, ``list`` (of
strings, numbers and booleans).

Guarantees of ``resolve``: the result holds every declared parameter, each of its
declared type; an override of an undeclared name, a value that does not parse as the
type, or a missing required value raises ``InvalidInput`` naming ``params.NAME``, the
value and the fix. Overrides written as text (``-p lr=0.1``) are read by the type:
int ``3``, float ``0.1`` or ``1``, bool ``true``/``false``, list as JSON (``["a", 1]``),
string as it is. An int is accepted where a float is declared; nothing else is converted;
NaN and infinities are refused (they have no JSON form, and a cache key is JSON).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline.templates import Value

ParamType: TypeAlias = Literal["string", "int", "float", "bool", "list"]
#: A scalar a parameter or a list parameter's item may hold.
Scalar: TypeAlias = str | int | float | bool
ParamValue: TypeAlias = Scalar | list[Scalar]

#: Most items of a list parameter (and of a foreach list), and longest string value.
MAX_LIST: Final = 10_000
MAX_STRING: Final = 64 * 2**10

_EXAMPLES: Final[Mapping[str, str]] = {
    "string": "any text",
    "int": "a whole number such as 3",
    "float": "a number such as 0.01",
    "bool": "true or false",
    "list": 'a JSON list such as ["a", 2]',
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Param:
    """A declared parameter: its type and default (``None``: required at submit)."""

    name: str
    type: ParamType
    default: ParamValue | None = None


def a(kind: str) -> str:
    """``kind`` with its article, for messages: ``an int``, ``a float``."""
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def type_of(value: ParamValue) -> ParamType:
    """The type a default declares."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, list):
        return "list"
    return "string"


def check_value(value: Value, kind: ParamType) -> ParamValue | None:
    """``value`` if it is of type ``kind`` (an int for a float becomes a float), else None."""
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if kind == "int":
        return value if isinstance(value, int) else None
    if kind == "float":
        if isinstance(value, int):
            return float(value)
        return value if isinstance(value, float) and math.isfinite(value) else None
    if kind == "string":
        return value if isinstance(value, str) and len(value) <= MAX_STRING else None
    if isinstance(value, list) and len(value) <= MAX_LIST:
        items: list[Scalar] = [
            v for v in value if isinstance(v, str | int) or (isinstance(v, float) and _finite(v))
        ]  # bool is an int
        return items if len(items) == len(value) else None
    return None


def _finite(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def parse_text(text: str, kind: ParamType) -> ParamValue | None:
    """``text`` read as a value of ``kind`` (see the module docstring), or None."""
    if kind == "string":
        return check_value(text, kind)
    if kind == "bool":
        return {"true": True, "false": False}.get(text.strip().lower())
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return check_value(value, kind)


def resolve(
    declared: Iterable[Param], overrides: Mapping[str, Value] | None = None
) -> dict[str, ParamValue]:
    """Every declared parameter's value for a run: its override, else its default.

    An override given as a string for a non-string parameter is parsed as text (the
    ``-p key=value`` form); any other is checked as it is. Raises ``InvalidInput``.
    """
    params = {param.name: param for param in declared}
    given = dict(overrides or {})
    for name in given:
        if name not in params:
            known = ", ".join(sorted(params)) or "none are declared"
            raise InvalidInput(
                f"{name[:60]!r} is not a parameter of this pipeline",
                field=f"params.{name[:60]}",
                fix=f"use one of: {known}",
            )
    values: dict[str, ParamValue] = {}
    for name, param in params.items():
        if name not in given:
            if param.default is None:
                raise InvalidInput(
                    "is required: it has no default",
                    field=f"params.{name}",
                    fix=f"give it at submit: -p {name}=VALUE ({_EXAMPLES[param.type]})",
                )
            values[name] = param.default
            continue
        raw = given[name]
        value = (
            parse_text(raw, param.type)
            if isinstance(raw, str) and param.type != "string"
            else check_value(raw, param.type)
        )
        if value is None:
            shown = raw if isinstance(raw, str) else json.dumps(raw)
            raise InvalidInput(
                f"{shown[:60]!r} is not {a(param.type)}",
                field=f"params.{name}",
                fix=f"give {_EXAMPLES[param.type]}",
            )
        values[name] = value
    return values


def parse_assignments(pairs: Iterable[str]) -> dict[str, str]:
    """``["lr=0.1", "tags=[1]"]`` as ``{"lr": "0.1", "tags": "[1]"}``: the ``-p`` options;
    raises ``InvalidInput`` for a pair without ``=`` or a name given twice."""
    result: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidInput(
                f"{pair[:60]!r} is not key=value", field="params", fix="write -p name=value"
            )
        if name in result:
            raise InvalidInput(
                "is given twice", field=f"params.{name[:60]}", fix="give each parameter once"
            )
        result[name] = value
    return result
