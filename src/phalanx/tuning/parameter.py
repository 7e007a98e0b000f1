"""One dimension of a tuning space: a typed, validated parameter of a replica's
resources, environment or arguments, or of a training role's replica count.

Guarantees:
- a ``Parameter`` that exists is valid: anything else is refused when it is made, with
  an InvalidInput naming ``parameters.NAME.FIELD`` and the fix;
- a resources parameter is one of ``cpu``, ``memory``, ``gpu``; its bounds and values
  are Kubernetes quantities (``"500m"``, ``"1Gi"``, numbers). An int or float resources
  parameter is held, and proposed, as a number in Kubernetes base units (cores, bytes,
  devices), which a resources block reads the same; a discrete one proposes its values
  as written;
- a replicas parameter is whole (int or discrete);
- int and float bounds span a whole number of steps (optuna would move ``high``
  otherwise); a log scale has ``low > 0`` and no step;
- discrete values (numbers or quantities) are distinct amounts, held in ascending
  order; categorical values are distinct.
"""

from __future__ import annotations

import decimal
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from phalanx.domain.errors import InvalidInput
from phalanx.domain.resources import CPU, GPU, MEMORY, parse_quantity

Category = Literal["resources", "env", "args", "replicas"]
Kind = Literal["int", "float", "discrete", "categorical"]
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
#: The resources a parameter may tune (what a cost is priced on).
RESOURCE_NAMES: Final = (CPU, MEMORY, GPU)
#: A value a discrete or categorical parameter may take (what optuna stores as it is).
Choice = str | int | float | bool | None

_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Parameter:
    """One dimension of a space. ``low``/``high``/``step``/``log`` for int and float
    (``step`` optional, ``log`` without a step), ``values`` for discrete and
    categorical. Use ``Parameter.parse`` to give a resources parameter's bounds as
    quantities."""

    name: str
    category: Category
    kind: Kind
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    values: tuple[Choice, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple):
            object.__setattr__(self, "values", tuple(self.values))
        _check_name(self)
        if self.kind in ("int", "float"):
            _check_range(self)
        elif self.kind in ("discrete", "categorical"):
            _check_values(self)
        else:
            raise InvalidInput(
                f"unknown kind {self.kind!r}", field=self._field("kind"), fix=" or ".join(KINDS)
            )

    @staticmethod
    def parse(
        *,
        name: str,
        category: Category,
        kind: Kind,
        low: str | float | None = None,
        high: str | float | None = None,
        step: str | float | None = None,
        log: bool = False,
        values: Sequence[Choice] = (),
    ) -> Parameter:
        """A parameter whose bounds may be quantities (resources only: ``"500m"`` is
        0.5 cores, ``"1Gi"`` 1073741824 bytes); numbers pass as they are."""
        where = f"parameters.{name}"

        def number(value: str | float | None, attr: str) -> float | None:
            if isinstance(value, str) and category == "resources":
                return parse_quantity(value, field=f"{where}.{attr}")
            if isinstance(value, str):
                raise InvalidInput(
                    f"{value[:40]!r} is not a number",
                    field=f"{where}.{attr}",
                    fix="write a number (quantities such as 1Gi are for resources parameters)",
                )
            return value

        return Parameter(
            name=name,
            category=category,
            kind=kind,
            low=number(low, "low"),
            high=number(high, "high"),
            step=number(step, "step"),
            log=log,
            values=tuple(values),
        )

    def index(self, value: Any, *, field: str) -> int:
        """The position of ``value`` among the values (1 and 1.0 are one value; True is
        not 1); InvalidInput naming ``field`` when it is none of them."""
        for i, candidate in enumerate(self.values):
            if value == candidate and isinstance(value, bool) == isinstance(candidate, bool):
                return i
        raise InvalidInput(f"{value!r} is not one of its values", field=field, fix=self.describe())

    def describe(self) -> str:
        """The values the parameter takes, in words."""
        if self.kind in ("discrete", "categorical"):
            return "one of " + ", ".join(repr(v) for v in self.values)
        step = f" in steps of {self.step:g}" if self.step else ""
        kind = "an int" if self.kind == "int" else "a float"
        return f"{kind} from {self.low:g} to {self.high:g}{step}"

    def _field(self, attr: str) -> str:
        return f"parameters.{self.name}.{attr}"


def is_number(value: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def exact(value: float) -> decimal.Decimal:
    """``value`` as the decimal it is written as (0.1 is 1/10), for exact steps."""
    return decimal.Decimal(str(value))


# -- validation ----------------------------------------------------------------------------


def _check_name(p: Parameter) -> None:
    if not isinstance(p.name, str) or not p.name:
        raise InvalidInput("a parameter without a name", field="parameters", fix="name it")
    if p.category not in CATEGORIES:
        raise InvalidInput(
            f"unknown category {p.category!r}",
            field=p._field("category"),
            fix=" or ".join(CATEGORIES),
        )
    if p.category == "resources" and p.name not in RESOURCE_NAMES:
        raise InvalidInput(
            f"{p.name!r} is not a resource a trial can tune",
            field=p._field("name"),
            fix=f"one of {', '.join(RESOURCE_NAMES)}",
        )
    if p.category == "replicas" and p.kind not in ("int", "discrete"):
        raise InvalidInput(
            "a replica count is a whole number",
            field=p._field("kind"),
            fix="int (low, high) or discrete values",
        )
    if p.category == "env" and not _ENV_NAME.match(p.name):
        raise InvalidInput(
            f"{p.name!r} is not an environment variable's name",
            field=p._field("name"),
            fix="letters, digits and '_', not starting with a digit",
        )


def _check_range(p: Parameter) -> None:
    if p.values:
        raise InvalidInput(
            f"an {p.kind} parameter takes low and high, not values",
            field=p._field("values"),
            fix="drop values, or make the parameter discrete",
        )
    for attr, value in (("low", p.low), ("high", p.high), ("step", p.step)):
        if value is None and attr != "step":
            raise InvalidInput("missing", field=p._field(attr), fix=f"give the {attr} bound")
        if value is not None and not is_number(value):
            raise InvalidInput(f"{value!r} is not a number", field=p._field(attr), fix="a number")
        if value is not None and p.kind == "int" and value != int(value):
            raise InvalidInput(
                f"{value!r} is not a whole number", field=p._field(attr), fix="a whole number"
            )
    assert p.low is not None and p.high is not None
    if p.low > p.high:
        raise InvalidInput(
            f"low {p.low:g} is above high {p.high:g}", field=p._field("low"), fix="low <= high"
        )
    if p.category == "resources" and p.low < 0:
        raise InvalidInput(f"{p.low:g} is negative", field=p._field("low"), fix="low >= 0")
    if p.log and p.low <= 0:
        raise InvalidInput(
            "a log scale needs low > 0", field=p._field("low"), fix="low > 0, or log: false"
        )
    if p.step is None:
        return
    if p.step <= 0:
        raise InvalidInput(f"step {p.step:g} is not positive", field=p._field("step"), fix="> 0")
    if p.log and not (p.kind == "int" and p.step == 1):
        raise InvalidInput(
            "a log scale takes no step", field=p._field("step"), fix="drop step, or log: false"
        )
    span = exact(p.high) - exact(p.low)
    if span % exact(p.step) != 0:
        fitting = float(exact(p.low) + (span // exact(p.step)) * exact(p.step))
        raise InvalidInput(
            f"{p.high:g} - {p.low:g} is not a multiple of step {p.step:g}",
            field=p._field("high"),
            fix=f"high {fitting:g}, or a step that divides the range",
        )


def _check_values(p: Parameter) -> None:
    if any(v is not None for v in (p.low, p.high, p.step)) or p.log:
        raise InvalidInput(
            f"a {p.kind} parameter takes values, not low, high, step or log",
            field=p._field("values"),
            fix="list its values only",
        )
    if not p.values:
        raise InvalidInput("no values", field=p._field("values"), fix="list at least one value")
    for i, value in enumerate(p.values):
        if not isinstance(value, str | int | float | bool | type(None)):
            raise InvalidInput(
                f"{type(value).__name__} is not a value a parameter can take",
                field=f"{p._field('values')}[{i}]",
                fix="a string, a number, true/false or null",
            )
    ordered = p.kind == "discrete" or p.category == "resources"
    keys: list[object] = [_amount(p, i, v) if ordered else v for i, v in enumerate(p.values)]
    for (a, x), (b, y) in itertools.combinations(zip(keys, p.values, strict=True), 2):
        if a == b:
            raise InvalidInput(
                f"{x!r} and {y!r} are the same value",
                field=p._field("values"),
                fix="list each value once",
            )
    if p.kind == "discrete":
        amounts = [_amount(p, i, v) for i, v in enumerate(p.values)]
        ranked = sorted(zip(amounts, p.values, strict=True), key=lambda pair: pair[0])
        object.__setattr__(p, "values", tuple(v for _, v in ranked))


def _amount(p: Parameter, i: int, value: Choice) -> float:
    """A discrete (or resources) value's amount: numbers as they are, quantities parsed."""
    where = f"{p._field('values')}[{i}]"
    if isinstance(value, bool) or value is None:
        raise InvalidInput(
            f"{value!r} is not a number", field=where, fix="a number or a quantity such as 1Gi"
        )
    if isinstance(value, int | float) and p.category != "resources":
        if not math.isfinite(value):
            raise InvalidInput(f"{value!r} is not finite", field=where, fix="a finite number")
        return float(value)
    return parse_quantity(value, field=where)
