"""Resource quantities and vectors.

Quantities parse like Kubernetes quantities (``500m``, ``16Gi``, ``1.5``, ``2e3``).
Canonical units inside phalanx: ``cpu`` in millicores, ``memory`` and ``gpu-memory``
in bytes, ``gpu`` in devices (fractional where GPU sharing is on), every other name
in its own plain unit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from phalanx.domain.errors import QuantityError

CPU: Final = "cpu"
MEMORY: Final = "memory"
GPU: Final = "gpu"
GPU_MEMORY: Final = "gpu-memory"

#: Dimensions every snapshot carries, in this order, before any extended name.
CORE_DIMENSIONS: Final = (CPU, MEMORY, GPU)

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_QUANTITY: Final = re.compile(
    r"^(?P<num>[+-]?(\d+(\.\d*)?|\.\d+))(?P<exp>[eE][+-]?\d+)?(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkKMGTPE]?)$"
)
_NAME: Final = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]{0,126}[A-Za-z0-9])?$")


def parse_quantity(value: str | int | float, *, field: str = "quantity") -> float:
    """Return the quantity in base units (``"500m"`` -> 0.5, ``"16Gi"`` -> 17179869184).

    Raises QuantityError naming ``field`` for anything that is not a finite,
    non-negative Kubernetes quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(
            f"expected a quantity, got {value!r}", field=field, fix="write a number"
        )
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        match = _QUANTITY.match(text)
        if match is None:
            raise QuantityError(
                f"{value[:40]!r} is not a quantity",
                field=field,
                fix="write a number with an optional suffix, e.g. 500m, 1.5, 16Gi, 80G",
            )
        number = float(match["num"] + (match["exp"] or ""))
        suffix = match["suffix"]
        number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    else:
        raise QuantityError(
            f"expected a quantity, got {type(value).__name__}", field=field, fix="write a number"
        )
    if not math.isfinite(number):
        raise QuantityError(f"{value!r} is not finite", field=field, fix="write a finite number")
    if number < 0:
        raise QuantityError(f"{value!r} is negative", field=field, fix="write a value >= 0")
    return number


def canonical_amount(name: str, value: str | int | float, *, field: str | None = None) -> float:
    """Parse ``value`` for resource ``name`` into phalanx's canonical unit for it."""
    where = field or name
    if not _NAME.match(name):
        raise QuantityError(
            f"{name[:60]!r} is not a resource name",
            field=where,
            fix="use letters, digits, '.', '_', '-' or '/', e.g. cpu, memory, gpu, rdma/hca",
        )
    amount = parse_quantity(value, field=where)
    if name == CPU:
        return round(amount * 1000.0, 6)
    if name in (MEMORY, GPU_MEMORY):
        return float(math.ceil(amount - 1e-9))
    return amount


def format_amount(name: str, amount: float) -> str:
    """Render a canonical amount for people: ``cpu`` in cores, bytes with binary suffixes."""
    if math.isinf(amount):
        return "unlimited"
    if name == CPU:
        cores = amount / 1000.0
        return f"{cores:g}" if cores == int(cores) or cores >= 1 else f"{amount:g}m"
    if name in (MEMORY, GPU_MEMORY):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if amount >= unit:
                return f"{amount / unit:.4g}{suffix}"
        return f"{amount:g}"
    return f"{amount:g}"


#: The order names are spoken in: what users ask for first, then the rest by name.
_SPOKEN_ORDER: Final = {GPU: 0, CPU: 1, MEMORY: 2, GPU_MEMORY: 3}


def spoken_amount(name: str, amount: float) -> str:
    """One amount as a person would say it: ``8 GPUs``, ``500m CPU``, ``2 CPUs``,
    ``32Gi memory``, ``10Gi GPU memory``, ``1 rdma/hca``."""
    text = format_amount(name, amount)
    if name == GPU:
        return f"{text} GPU" if 0 < amount <= 1 else f"{text} GPUs"
    if name == CPU:
        return f"{text} CPU" if 0 < amount <= 1000 else f"{text} CPUs"
    if name == MEMORY:
        return f"{text} memory"
    if name == GPU_MEMORY:
        return f"{text} GPU memory"
    return f"{text} {name}"


def spoken_list(parts: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(parts)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


@dataclass(frozen=True, slots=True, eq=False)
class Resources(Mapping[str, float]):
    """An immutable resource vector in canonical units.

    Names written with a zero amount are kept, because for a quota ``gpu: 0`` (none)
    differs from leaving ``gpu`` out (no limit of its own). As vectors, absent names
    read as zero, and equality and hashing ignore zero entries, so
    ``Resources.of({"gpu": 0}) == Resources()``.
    """

    _items: tuple[tuple[str, float], ...] = ()

    @staticmethod
    def of(amounts: Mapping[str, float] | Iterable[tuple[str, float]] = ()) -> Resources:
        """Build from amounts already in canonical units (repeated names are summed)."""
        pairs = amounts.items() if isinstance(amounts, Mapping) else amounts
        merged: dict[str, float] = {}
        for name, value in pairs:
            merged[name] = merged.get(name, 0.0) + float(value)
        return Resources(tuple(sorted(merged.items())))

    def _nonzero(self) -> tuple[tuple[str, float], ...]:
        return tuple(item for item in self._items if item[1] != 0.0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._nonzero() == other._nonzero()

    def __hash__(self) -> int:
        return hash(self._nonzero())

    @staticmethod
    def parse(amounts: Mapping[str, str | int | float], *, field: str = "resources") -> Resources:
        """Parse Kubernetes-style quantities (``{"cpu": "500m", "memory": "16Gi"}``)."""
        return Resources.of(
            (name, canonical_amount(name, value, field=f"{field}.{name}"))
            for name, value in amounts.items()
        )

    def __getitem__(self, name: str) -> float:
        for key, value in self._items:
            if key == name:
                return value
        raise KeyError(name)

    def get(self, name: str, default: float = 0.0) -> float:  # type: ignore[override]
        for key, value in self._items:
            if key == name:
                return value
        return default

    def items(self) -> tuple[tuple[str, float], ...]:  # type: ignore[override]
        """(name, amount) pairs, sorted by name."""
        return self._items

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __add__(self, other: Resources) -> Resources:
        return Resources.of([*self._items, *other._items]).without_zeros()

    def __sub__(self, other: Resources) -> Resources:
        return Resources.of([*self._items, *((k, -v) for k, v in other._items)]).without_zeros()

    def without_zeros(self) -> Resources:
        """The same vector with zero entries dropped."""
        return Resources(self._nonzero())

    def scaled(self, factor: float) -> Resources:
        """Every amount multiplied by ``factor``."""
        return Resources.of((k, v * factor) for k, v in self._items).without_zeros()

    def fits_in(self, capacity: Mapping[str, float]) -> bool:
        """True when every amount is at most the same name in ``capacity``."""
        return all(value <= capacity.get(name, 0.0) + 1e-9 for name, value in self._items)

    def describe(self) -> str:
        """People's form: ``cpu=8, memory=32Gi, gpu=8``."""
        return ", ".join(f"{k}={format_amount(k, v)}" for k, v in self._nonzero()) or "nothing"

    def spoken(self) -> str:
        """People's words, GPUs first: ``8 GPUs, 2 CPUs and 32Gi memory``."""
        ranked = sorted(self._nonzero(), key=lambda kv: (_SPOKEN_ORDER.get(kv[0], 9), kv[0]))
        return spoken_list(spoken_amount(k, v) for k, v in ranked) or "nothing"

    def __repr__(self) -> str:
        return f"Resources({self.describe()})"
