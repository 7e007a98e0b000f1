"""``when`` conditions: a small expression language, parsed once, evaluated without ``eval``.

Grammar (whitespace between tokens is free)::

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := operand (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") operand)?
    operand    := {{reference}} | number | 'text' | "text" | true | false | null
                | [operand, ...] | ( condition )

References are those of ``phalanx.spec.pipeline.templates`` (``{{params.x}}``,
``{{steps.s.outputs.x}}``, ``{{item}}``, ``{{item.key}}``, ``{{run.id}}``); their filters are
refused here. Example: ``{{steps.eval.outputs.accuracy}} >= 0.9 and not {{params.dry}}``.

Guarantees:

- ``Condition.parse`` raises ``ConditionError`` (saying where and what is expected) for
  anything outside the grammar, more than ``MAX_CONDITION_LENGTH`` characters, or nesting
  deeper than ``MAX_DEPTH``.
- ``evaluate`` returns a bool or raises ``ConditionError``; it never runs code. ``and`` /
  ``or`` / ``not`` and the condition as a whole take booleans only (no truthiness: ``0``,
  ``""`` and ``[]`` are errors, not false). ``<`` ``<=`` ``>`` ``>=`` compare two numbers
  or two strings; ``==`` ``!=`` compare any values, and ``true`` is never ``1``; ``in``
  tests membership in a list or a substring of a string.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline.templates import (
    Context,
    Filter,
    Reference,
    TemplateError,
    Value,
    parse_reference,
    to_text,
)

MAX_CONDITION_LENGTH: Final = 4096
MAX_DEPTH: Final = 32

_TOKEN: Final = re.compile(
    r"\s*(?:(?P<ref>\{\{.*?\}\})|(?P<num>-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
    r"|(?P<str>\"[^\"\\]*\"|'[^'\\]*')|(?P<word>[A-Za-z_]+)|(?P<op>==|!=|<=|>=|<|>|[()\[\],]))"
)
_GRAMMAR: Final = (
    "write comparisons (== != < <= > >= in) of {{references}}, numbers, 'text', "
    "true, false, null and [lists], joined by and, or, not and parentheses"
)


class ConditionError(InvalidInput):
    """A condition that does not parse, or cannot be evaluated on the values it got."""


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value


@dataclass(frozen=True, slots=True)
class Ref:
    ref: Reference


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class Bool:
    op: str  # "and" | "or"
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Node
    right: Node


Node: TypeAlias = Literal | Ref | ListOf | Not | Bool | Compare

_ORDER: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_COMPARISONS: Final = frozenset({"==", "!=", "<", "<=", ">", ">=", "in"})


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            shown = text[position:].strip()[:30]
            raise ConditionError(f"cannot read {shown!r} (character {position + 1})", fix=_GRAMMAR)
        tokens.append((match.lastgroup, match[match.lastgroup]))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise ConditionError("the condition ends too early", fix=_GRAMMAR)
        self.position += 1
        return token

    def expect(self, text: str) -> None:
        if self.peek() is None:
            raise ConditionError(f"expected {text!r}, but the condition ends", fix=_GRAMMAR)
        token = self.take()
        if token[1] != text:
            raise ConditionError(f"expected {text!r}, found {token[1][:30]!r}", fix=_GRAMMAR)

    def word(self, *words: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "word" and token[1] in words:
            self.position += 1
            return True
        return False

    def condition(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ConditionError(f"nested more than {MAX_DEPTH} deep", fix="simplify it")
        try:
            return self.joined("or", lambda: self.joined("and", self.negation))
        finally:
            self.depth -= 1

    def joined(self, op: str, part: Callable[[], Node]) -> Node:
        operands = [part()]
        while self.word(op):
            operands.append(part())
        return operands[0] if len(operands) == 1 else Bool(op, tuple(operands))

    def negation(self) -> Node:
        if self.word("not"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ConditionError(f"nested more than {MAX_DEPTH} deep", fix="simplify it")
            try:
                return Not(self.negation())
            finally:
                self.depth -= 1
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        token = self.peek()
        if token is None:
            return left
        if token[0] == "word" and token[1] == "not" and self._next_is_in():
            self.position += 2
            return Not(Compare("in", left, self.operand()))
        if token[1] in _COMPARISONS:
            self.position += 1
            return Compare(token[1], left, self.operand())
        return left

    def _next_is_in(self) -> bool:
        after = self.position + 1
        return after < len(self.tokens) and self.tokens[after] == ("word", "in")

    def operand(self) -> Node:
        kind, text = self.take()
        if kind == "ref":
            ref = _reference(text)
            return Ref(ref)
        if kind == "num":
            number = float(text) if re.search(r"[.eE]", text) else int(text)
            if abs(number) > 2**63 or not math.isfinite(number):
                raise ConditionError(f"{text[:30]} is too large", fix="write a smaller number")
            return Literal(number)
        if kind == "str":
            return Literal(text[1:-1])
        if kind == "word" and text in ("true", "false", "null"):
            return Literal({"true": True, "false": False, "null": None}[text])
        if text == "(":
            inner = self.condition()
            self.expect(")")
            return inner
        if text == "[":
            return self.list_of()
        raise ConditionError(f"expected a value, found {text[:30]!r}", fix=_GRAMMAR)

    def list_of(self) -> Node:
        items: list[Node] = []
        while self.peek() is not None and self.peek() != ("op", "]"):
            items.append(self.operand())
            if self.peek() != ("op", "]"):
                self.expect(",")
        self.expect("]")
        return ListOf(tuple(items))


def _reference(text: str) -> Reference:
    ref = parse_reference(text[2:-2].strip())
    if ref.filter is not Filter.AUTO:
        raise ConditionError(f"{text[:60]}: filters do not apply in a condition", fix="remove it")
    return ref


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition and its source text."""

    text: str
    root: Node

    @staticmethod
    def parse(text: str) -> Condition:
        """Parse ``text``; raises ``ConditionError`` (a ``TemplateError`` for a bad
        reference)."""
        if len(text) > MAX_CONDITION_LENGTH:
            raise ConditionError(
                f"{len(text)} characters is more than the limit of {MAX_CONDITION_LENGTH}",
                fix="compute the decision in a step and test its output",
            )
        if not text.strip():
            raise ConditionError("the condition is empty", fix="write a condition, or omit when")
        parser = _Parser(text)
        root = parser.condition()
        rest = parser.peek()
        if rest is not None:
            raise ConditionError(
                f"unexpected {rest[1][:30]!r} after a complete condition", fix=_GRAMMAR
            )
        return Condition(text, root)

    @property
    def references(self) -> tuple[Reference, ...]:
        """Every reference, in order."""
        found: list[Reference] = []
        stack: list[Node] = [self.root]
        while stack:
            node = stack.pop()
            match node:
                case Ref(ref):
                    found.append(ref)
                case ListOf(items) | Bool(_, items):
                    stack.extend(reversed(items))
                case Not(operand):
                    stack.append(operand)
                case Compare(_, left, right):
                    stack.extend((right, left))
        return tuple(found)

    def evaluate(self, context: Context, *, field: str = "when") -> bool:
        """Whether the condition holds; raises ``ConditionError`` or ``TemplateError``."""
        try:
            return _truth(_value(self.root, context, field), self.text)
        except TemplateError:
            raise
        except ConditionError as error:
            raise ConditionError(
                f"step {context.step}, {field}: {self.text[:80]!r}: {error}".removesuffix(
                    f"; fix: {error.fix}"
                ),
                fix=error.fix,
            ) from None


def _value(node: Node, context: Context, field: str) -> Value:
    match node:
        case Literal(value):
            return value
        case Ref(ref):
            return context.lookup(ref, field=field)
        case ListOf(items):
            return [_value(item, context, field) for item in items]
        case Not(operand):
            return not _truth(_value(operand, context, field), "not")
        case Bool(op, operands):
            for operand in operands:
                truth = _truth(_value(operand, context, field), op)
                if truth == (op == "or"):
                    return truth
            return op == "and"
        case Compare(op, left, right):
            return _compare(op, _value(left, context, field), _value(right, context, field))


def _truth(value: Value, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ConditionError(
        f"{where} needs true or false, got {to_text(value)[:40]}",
        fix="compare the value, e.g. {{params.x}} == 'yes' or {{params.n}} > 0",
    )


def _number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare(op: str, left: Value, right: Value) -> bool:
    if op in ("==", "!="):
        same = type(left) is type(right) or (_number(left) and _number(right))
        return (same and left == right) == (op == "==")
    if op == "in":
        if isinstance(right, list):
            return any(_compare("==", left, item) for item in right)
        if isinstance(right, str) and isinstance(left, str):
            return left in right
        raise ConditionError(
            f"in needs a list, or text in text; got {to_text(right)[:40]}",
            fix="test membership in a list output or param",
        )
    if (_number(left) and _number(right)) or (isinstance(left, str) and isinstance(right, str)):
        return _ORDER[op](left, right)
    raise ConditionError(
        f"{op} compares two numbers or two strings; got {to_text(left)[:30]} and "
        f"{to_text(right)[:30]}",
        fix="compare values of one type (an output param's type is set in its outputs entry)",
    )
