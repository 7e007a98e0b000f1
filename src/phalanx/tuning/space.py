"""A search space over an inference replica's spec: its resources, environment and
arguments, each a typed parameter.

Guarantees:
- a ``Space`` that exists is valid: at least one parameter (``parameter.Parameter``,
  valid too), each name once; anything else is an InvalidInput naming the field;
- discrete values are searched by their rank, so that samplers see their order;
  categorical values are unordered;
- ``grid`` is the whole Cartesian product, in parameter order, each parameter's values
  ascending (int and float need a step); ``distributions`` and ``to_optuna`` /
  ``from_optuna`` are the one mapping to and from optuna's parameters, and a value
  that went through both comes back equal.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.parameter import (
    CATEGORIES,
    KINDS,
    RESOURCE_NAMES,
    Category,
    Choice,
    Kind,
    Parameter,
    exact,
    is_number,
)

__all__ = [
    "CATEGORIES",
    "GRID_LIMIT",
    "KINDS",
    "RESOURCE_NAMES",
    "Category",
    "Choice",
    "Kind",
    "Parameter",
    "Space",
    "distributions",
    "from_optuna",
    "grid",
    "grid_size",
    "parse_space",
    "to_optuna",
    "values_of",
]

#: The most points ``grid`` enumerates unless told otherwise.
GRID_LIMIT: Final = 100_000


@dataclass(frozen=True, slots=True)
class Space:
    """Parameters with distinct names, in the order given (the order of ``grid``)."""

    parameters: tuple[Parameter, ...]

    def __post_init__(self) -> None:
        if not self.parameters:
            raise InvalidInput(
                "no parameter to tune", field="parameters", fix="give at least one parameter"
            )
        seen: set[str] = set()
        for parameter in self.parameters:
            if parameter.name in seen:
                raise InvalidInput(
                    f"two parameters are named {parameter.name!r}",
                    field=f"parameters.{parameter.name}",
                    fix="give each parameter its own name",
                )
            seen.add(parameter.name)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.parameters)

    def __len__(self) -> int:
        return len(self.parameters)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def by_category(self, params: Mapping[str, Any]) -> dict[Category, dict[str, Any]]:
        """``params`` split by category (every category present, maybe empty): the
        resources, environment and arguments of a candidate spec."""
        out: dict[Category, dict[str, Any]] = {category: {} for category in CATEGORIES}
        for parameter in self.parameters:
            out[parameter.category][parameter.name] = params[parameter.name]
        return out


#: The keys ``parse_space`` reads from each entry.
_KEYS: Final = ("name", "category", "kind", "low", "high", "step", "log", "values")


def parse_space(entries: Sequence[Mapping[str, Any]], *, field: str = "parameters") -> Space:
    """A space from plain entries (JSON or YAML mappings with ``Parameter.parse``'s
    keywords); InvalidInput names an entry that is not a mapping or has an unknown key."""
    parameters = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InvalidInput(
                "not a mapping", field=f"{field}[{i}]", fix="name, category, kind, ..."
            )
        unknown = sorted(set(entry) - set(_KEYS))
        if unknown:
            raise InvalidInput(
                f"unknown key {', '.join(unknown)}",
                field=f"{field}[{i}]",
                fix=f"only {', '.join(_KEYS)}",
            )
        for key in ("name", "category", "kind"):
            if key not in entry:
                raise InvalidInput("missing", field=f"{field}[{i}].{key}", fix=f"give its {key}")
        parameters.append(Parameter.parse(**entry))
    return Space(tuple(parameters))


def values_of(parameter: Parameter) -> list[Choice]:
    """Every value ``parameter`` takes on a grid, ascending for ordered kinds."""
    if parameter.kind in ("discrete", "categorical"):
        return list(parameter.values)
    assert parameter.low is not None and parameter.high is not None
    if parameter.step is None and parameter.kind == "float":
        raise InvalidInput(
            "a float parameter without a step has no grid",
            field=parameter._field("step"),
            fix="give a step, or make the parameter discrete with its values",
        )
    if parameter.kind == "int":
        return list(range(int(parameter.low), int(parameter.high) + 1, int(parameter.step or 1)))
    low, step = exact(parameter.low), exact(parameter.step or 1)
    count = int((exact(parameter.high) - low) / step) + 1
    return [float(low + i * step) for i in range(count)]


def grid_size(space: Space) -> int | None:
    """How many points ``grid`` has; None when a parameter has no grid."""
    try:
        return math.prod(len(values_of(p)) for p in space)
    except InvalidInput:
        return None


def grid(space: Space, *, limit: int = GRID_LIMIT) -> list[dict[str, Any]]:
    """The full Cartesian product of the parameters' values (see the module's
    guarantees); InvalidInput for a parameter without a grid or more than ``limit``
    points."""
    columns = [values_of(p) for p in space]
    size = math.prod(len(column) for column in columns)
    if size > limit:
        raise InvalidInput(
            f"the grid has {size} points, over {limit}",
            field="parameters",
            fix="take larger steps or fewer values",
        )
    return [dict(zip(space.names, point, strict=True)) for point in itertools.product(*columns)]


def distributions(space: Space) -> dict[str, BaseDistribution]:
    """The optuna distribution of each parameter (a discrete one's is its rank)."""
    out: dict[str, BaseDistribution] = {}
    for p in space:
        if p.kind == "int":
            assert p.low is not None and p.high is not None
            out[p.name] = IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
        elif p.kind == "float":
            assert p.low is not None and p.high is not None
            out[p.name] = FloatDistribution(p.low, p.high, log=p.log, step=p.step)
        elif p.kind == "discrete":
            out[p.name] = IntDistribution(0, len(p.values) - 1)
        else:
            out[p.name] = CategoricalDistribution(p.values)
    return out


def to_optuna(space: Space, params: Mapping[str, Any], *, field: str = "params") -> dict[str, Any]:
    """``params`` as optuna's parameters (a discrete value as its rank); InvalidInput
    for a missing or unknown name, or a value outside its parameter."""
    unknown = sorted(set(params) - set(space.names))
    if unknown:
        raise InvalidInput(
            f"{', '.join(unknown)} not in the space", field=field, fix="tune the space's names"
        )
    out: dict[str, Any] = {}
    for p in space:
        where = f"{field}.{p.name}"
        if p.name not in params:
            raise InvalidInput("missing", field=where, fix="give a value for every parameter")
        value = params[p.name]
        if p.kind in ("discrete", "categorical"):
            index = p.index(value, field=where)
            out[p.name] = index if p.kind == "discrete" else p.values[index]
        elif is_number(value) and _on_range(p, value):
            out[p.name] = int(value) if p.kind == "int" else _snap(p, float(value))
        else:
            raise InvalidInput(f"{value!r} is outside the parameter", field=where, fix=p.describe())
    return out


def from_optuna(space: Space, internal: Mapping[str, Any]) -> dict[str, Any]:
    """Optuna's parameters as values of the space (a stepped float snapped to its step,
    so that equal points compare equal)."""
    out: dict[str, Any] = {}
    for p in space:
        value = internal[p.name]
        if p.kind == "discrete":
            value = p.values[int(value)]
        elif p.kind == "int":
            value = int(value)
        elif p.kind == "float":
            value = _snap(p, float(value))
        out[p.name] = value
    return out


def _on_range(p: Parameter, value: float) -> bool:
    assert p.low is not None and p.high is not None
    if not p.low <= value <= p.high:
        return False
    if p.kind == "int":
        return value == int(value) and (int(value) - int(p.low)) % int(p.step or 1) == 0
    if p.step is None:
        return True
    k = (value - p.low) / p.step
    return abs(k - round(k)) < 1e-8


def _snap(p: Parameter, value: float) -> float:
    """A float on its step's grid, exactly as ``values_of`` writes it."""
    if p.step is None:
        return value
    assert p.low is not None
    low, step = exact(p.low), exact(p.step)
    return float(low + round((exact(value) - low) / step) * step)
