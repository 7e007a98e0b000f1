"""Index templates such as ``"tor-{index // 16}"``: a node's place in the network.

Guarantees: a template is parsed, never executed. Inside ``{...}`` only integer
constants, the name ``index``, parentheses and ``+ - * // %`` are accepted;
anything else is refused with a ``DocumentError`` saying what is allowed. ``{{``
and ``}}`` stand for literal braces.
"""

from __future__ import annotations

import ast
import operator
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from phalanx.domain.errors import DocumentError

MAX_EXPRESSION_LENGTH: Final = 100

_OPERATORS: Final[dict[type[ast.operator], Callable[[int, int], int]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_ALLOWED: Final = "integers, the name index, parentheses and + - * // %, e.g. tor-{index // 16}"


@dataclass(frozen=True, slots=True)
class IndexTemplate:
    """A parsed template: literal text and integer expressions of ``index``."""

    parts: tuple[str | ast.expr, ...]

    @staticmethod
    def parse(text: str) -> IndexTemplate:
        """Parse ``text``; raises ``DocumentError`` for anything but the allowed arithmetic."""
        try:
            pieces = list(string.Formatter().parse(text))
        except ValueError as error:
            raise DocumentError(
                f"{text[:60]!r}: {error}", fix="write {{ and }} for braces"
            ) from None
        parts: list[str | ast.expr] = []
        for literal, expression, spec, conversion in pieces:
            parts.append(literal)
            if expression is None:
                continue
            if spec or conversion:
                raise DocumentError(
                    f"{text[:60]!r}: format specs and conversions are not supported",
                    fix=f"use only {_ALLOWED}",
                )
            parts.append(_parse_expression(expression))
        return IndexTemplate(tuple(parts))

    def render(self, index: int) -> str:
        """The text for node number ``index``; raises ``DocumentError`` on division by zero."""
        return "".join(p if isinstance(p, str) else str(_evaluate(p, index)) for p in self.parts)


def _parse_expression(expression: str) -> ast.expr:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise DocumentError(
            f"an expression is longer than {MAX_EXPRESSION_LENGTH} characters",
            fix="shorten it",
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        raise DocumentError(
            f"{{{expression}}} is not an expression", fix=f"use only {_ALLOWED}"
        ) from None
    for node in ast.walk(tree):
        if not _allowed(node):
            raise DocumentError(
                f"{{{expression}}} uses {ast.unparse(node)!r}, which is not allowed",
                fix=f"use only {_ALLOWED}",
            )
    return tree


def _allowed(node: ast.AST) -> bool:
    match node:
        case ast.BinOp(op=op):
            return type(op) in _OPERATORS
        case ast.Constant(value=value):
            return type(value) is int
        case ast.Name(id="index") | ast.Load() | ast.operator():
            return True
        case _:
            return False


def _evaluate(node: ast.expr, index: int) -> int:
    match node:
        case ast.BinOp(left=left, op=op, right=right):
            a, b = _evaluate(left, index), _evaluate(right, index)
            if b == 0 and isinstance(op, ast.FloorDiv | ast.Mod):
                raise DocumentError(
                    f"{{{ast.unparse(node)}}} divides by zero for index {index}",
                    fix="divide by a value that is never zero",
                )
            return _OPERATORS[type(op)](a, b)
        case ast.Constant(value=int() as value):
            return value
        case _:  # _allowed admits no other node than the name index
            return index
