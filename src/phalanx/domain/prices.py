"""What the admin charges for holding resources: hourly rates per node class.

Guarantees:
- ``Rates`` prices one hour of a resource's unit: a core of ``cpu``, a GiB of
  ``memory``, a device of ``gpu``, one unit of any other resource (``rdma/hca``). A
  resource it does not name costs nothing; ``cost`` of amounts in phalanx's canonical
  units (millicores, bytes, devices) over ``hours`` is the sum of unit x rate x hours;
- ``PriceSheet.price_class`` is the name of the first of its ``classes`` whose labels
  all equal the node's (``default`` when none matches): the same labels give the same
  class, so a report priced from a node's stored labels needs no node that may be gone;
- ``PriceSheet.rates`` of a class on a reclaimable node is that class's rates times its
  reclaimable multiplier (the class's own, else the sheet's): a reclaimable node is
  priced apart from an on-demand one of the same class, and ``saving`` is what the
  same hours would have cost more on demand (0 on a node that is not reclaimable).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.domain.resources import CPU, GPU, MEMORY

#: The class of a node that no class of a sheet matches.
DEFAULT_CLASS: Final = "default"
#: Canonical units per priced unit: a core is 1000 millicores, a GiB 2**30 bytes.
UNIT: Final = {CPU: 1000.0, MEMORY: float(2**30)}


def check_price(value: float, *, field: str) -> float:
    """``value`` when it is a finite number >= 0; else ``InvalidInput`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{value!r} is not a price", field=field, fix="give a number >= 0")
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"{value!r} is not a price", field=field, fix="give a number >= 0")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """Hourly prices by resource name (cpu per core, memory per GiB, other per unit)."""

    prices: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in self.prices.items():
            check_price(value, field=f"prices.{name}")

    def get(self, name: str) -> float:
        """The hourly price of one unit of ``name`` (0 when unpriced)."""
        return self.prices.get(name, 0.0)

    def hourly(self, amounts: Mapping[str, float]) -> float:
        """What ``amounts`` (canonical units) cost for one hour."""
        return sum(
            amount / UNIT.get(name, 1.0) * self.get(name) for name, amount in amounts.items()
        )

    def cost(self, amounts: Mapping[str, float], hours: float) -> float:
        """What ``amounts`` (canonical units) cost for ``hours``."""
        return self.hourly(amounts) * hours

    def scaled(self, factor: float) -> Rates:
        """Every price times ``factor``."""
        return Rates(prices={name: value * factor for name, value in self.prices.items()})

    def over(self, base: Rates) -> Rates:
        """``base`` with these prices replacing its own."""
        return Rates(prices={**base.prices, **self.prices})


#: The prices of a sheet that sets none: a GPU costs ten cores, a core eight GiB.
DEFAULT_RATES: Final = Rates(prices={CPU: 1.0, MEMORY: 0.125, GPU: 10.0})


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceClass:
    """Nodes whose labels include all of ``match``: priced ``rates`` (over the sheet's
    default), on reclaimable nodes times ``reclaimable`` (None: the sheet's multiplier)."""

    name: str
    match: Mapping[str, str]
    rates: Rates
    reclaimable: float | None = None

    def __post_init__(self) -> None:
        if self.reclaimable is not None:
            check_price(self.reclaimable, field=f"classes.{self.name}.reclaimable")


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceSheet:
    """The admin's prices: ``default`` rates, ``classes`` of nodes by label (first match
    wins) and the ``reclaimable`` multiplier of spot-like nodes."""

    default: Rates = DEFAULT_RATES
    classes: tuple[PriceClass, ...] = ()
    reclaimable: float = 1.0

    def __post_init__(self) -> None:
        check_price(self.reclaimable, field="reclaimable.multiplier")
        names = [c.name for c in self.classes]
        if DEFAULT_CLASS in names or len(set(names)) != len(names):
            raise InvalidInput(
                f"two price classes share a name, or one is named {DEFAULT_CLASS!r}",
                field="classes",
                fix=f"give every class its own name, other than {DEFAULT_CLASS!r}",
            )

    def price_class(self, labels: Mapping[str, str]) -> str:
        """The class of a node with ``labels``."""
        for cls in self.classes:
            if all(labels.get(key) == value for key, value in cls.match.items()):
                return cls.name
        return DEFAULT_CLASS

    def rates(self, name: str, *, reclaimable: bool) -> Rates:
        """The rates of class ``name`` (an unknown one: the default's), on a reclaimable
        node or an on-demand one."""
        cls = next((c for c in self.classes if c.name == name), None)
        rates = self.default if cls is None else cls.rates.over(self.default)
        if not reclaimable:
            return rates
        multiplier = self.reclaimable if cls is None or cls.reclaimable is None else cls.reclaimable
        return rates.scaled(multiplier)

    def saving(self, name: str, amounts: Mapping[str, float], hours: float) -> float:
        """What ``amounts`` held ``hours`` on a reclaimable node of class ``name`` saved
        against the same on demand."""
        on_demand = self.rates(name, reclaimable=False).cost(amounts, hours)
        return on_demand - self.rates(name, reclaimable=True).cost(amounts, hours)
