"""Turn validation failures into ``DocumentError`` messages a person can act on.

Guarantees: every message names where the input came from (source, 1-based
document number, kind and name when known), the field path in document syntax
(``spec.roles[1].resources.gpu``), what is wrong and the fix. Offending values are
shown through ``repr`` and truncated, so control characters never reach a terminal.

Warnings: an importer reports each field of a foreign document that it read but that
phalanx does not honour as a ``Notice``; the loader words it like an error, under the
same header (``notice_line``), and hands it to the caller's ``warn``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from phalanx.domain.errors import DocumentError
from phalanx.spec.common import ERROR_TYPE, UNION_TAG, Loc

#: Problems listed in one message; the rest are counted.
MAX_PROBLEMS: Final = 10

_SIMPLE_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_/-]*")

_EXPECTED: Final = {
    "int_type": ("expected an integer", "write a whole number such as 2"),
    "float_type": ("expected a number", "write a number such as 1.5"),
    "bool_type": ("expected true or false", "write true or false"),
    "string_type": ("expected a string", "write text; quote it if YAML reads it as another type"),
    "dict_type": ("expected a mapping", "write key: value pairs"),
    "model_type": ("expected a mapping", "write key: value pairs"),
    "model_attributes_type": ("expected a mapping", "write key: value pairs"),
    "list_type": ("expected a list", "write a list, e.g. [a, b]"),
    "invalid_key": ("keys must be strings", "quote the key"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a document: where, what and how to fix it."""

    path: str  # empty for the document as a whole
    detail: str  # what is wrong, then "; fix: ..."
    fix: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """A field of a document that phalanx read but does not honour: where it is (document
    syntax, as in ``Problem``) and what phalanx does instead."""

    path: str
    detail: str


#: Where the loader sends each warning line (``notice_line``): ``phalanx apply`` prints them.
Warn: TypeAlias = Callable[[str], None]


def notice_line(header: str, notice: Notice) -> str:
    """``notice`` as one line under ``header``, worded like an error of ``document_error``."""
    return ": ".join(filter(None, (header, notice.path, notice.detail)))


def format_path(loc: Iterable[str | int]) -> str:
    """A location in document syntax: ``spec.roles[1].resources['nvidia.com/gpu']``.

    The document itself is the empty path.
    """
    text = ""
    for part in loc:
        if isinstance(part, str) and part.startswith(UNION_TAG):
            continue  # which member of a tagged union: not a place in the document
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":
            text += " (the key)"
        elif len(part) <= 60 and _SIMPLE_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part[:60]!r}]"
    return text


def problems_of(error: ValidationError) -> list[Problem]:
    """Every failure of ``error``, as problems in document order."""
    return [_problem(details) for details in error.errors()]


def _problem(details: ErrorDetails) -> Problem:
    loc: Loc = tuple(details["loc"])
    ctx: dict[str, Any] = dict(details.get("ctx") or {})
    kind = details["type"]
    if kind == ERROR_TYPE:
        return Problem(
            path=format_path(loc + tuple(ctx["at"])), detail=ctx["detail"], fix=ctx["fix"]
        )
    reason, fix = _describe(kind, ctx, details["input"], details["msg"])
    return Problem(path=format_path(loc), detail=f"{reason}; fix: {fix}", fix=fix)


def _describe(kind: str, ctx: dict[str, Any], value: Any, msg: str) -> tuple[str, str]:
    if kind == "missing":
        return "is required", "add this field"
    if kind in _EXPECTED:
        reason, fix = _EXPECTED[kind]
        return f"{reason}, got {_shown(value)}", fix
    for bound, words in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if bound in ctx:
            return (
                f"must be {words} {ctx[bound]}, got {_shown(value)}",
                f"use a value {words} {ctx[bound]}",
            )
    if kind == "literal_error":
        return f"{_shown(value)} is not allowed", f"use one of {ctx['expected']}"
    if kind == "too_short":
        return "must not be empty", f"give at least {ctx.get('min_length', 1)} item(s)"
    if kind == "too_long" and "max_length" in ctx:
        most = ctx["max_length"]
        found = f"{ctx['actual_length']} items" if "actual_length" in ctx else "more items"
        return f"{found} is more than the limit of {most}", f"give at most {most}"
    if kind == "finite_number":
        return f"{_shown(value)} is not finite", "write a finite number"
    return msg, "correct the value"


def _shown(value: Any) -> str:
    if isinstance(value, dict | list):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def document_error(header: str, problems: list[Problem]) -> DocumentError:
    """One ``DocumentError`` for ``problems`` of the document described by ``header``.

    ``field`` and ``fix`` of the error are those of the first problem.
    """
    lines = [": ".join(filter(None, (header, p.path, p.detail))) for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"... and {len(problems) - MAX_PROBLEMS} more problem(s)")
    error = DocumentError("\n".join(lines))
    error.field, error.fix = problems[0].path or None, problems[0].fix
    return error
