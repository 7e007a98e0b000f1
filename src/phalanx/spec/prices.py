"""The ``Prices`` document: what the admin charges per hour, by node class
(``phalanx up --prices FILE``), and its short form ``cpu=1,memory=0.125,gpu=10``.

```yaml
apiVersion: phalanx/v1
kind: Prices
spec:
  default: {cpu: 1, memory: 0.125, gpu: 10}   # per core-, GiB- and GPU-hour
  classes:
  - name: a100
    match: {phalanx.io/gpu-model: A100-SXM4-80GB}   # every label must match
    prices: {gpu: 30}                               # the rest: the default's
  reclaimable: {multiplier: 0.3}   # nodes labelled phalanx.io/reclaimable: "true"
```

Guarantees: a document that loads is a valid ``PriceSheet``; every refusal (bad YAML,
an unknown field, a negative or non-numeric price, a class without labels to match, two
classes of one name) is a ``DocumentError`` naming the source, the field path and the
fix. The short form keeps the default of every resource it does not name.
"""

from __future__ import annotations

import os
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.domain.prices import DEFAULT_RATES, PriceClass, PriceSheet, Rates
from phalanx.domain.resources import canonical_amount
from phalanx.spec.common import API_VERSION, LabelKey, LabelValue, SpecModel
from phalanx.spec.diagnostics import document_error, problems_of

#: The largest prices file read.
MAX_PRICES_BYTES = 1 << 20


class ReclaimableSpec(SpecModel):
    """How reclaimable (spot-like) nodes are priced."""

    multiplier: float = Field(default=1.0, ge=0)
    """Their price is their class's times this (0.3: 70% off); default 1."""


class PriceClassSpec(SpecModel):
    """A class of nodes priced apart: those whose labels include every one of ``match``."""

    name: str = Field(min_length=1, max_length=63)
    """The class's name, shown in usage reports."""
    match: dict[LabelKey, LabelValue] = Field(min_length=1)
    """Node labels that must all be equal, e.g. phalanx.io/gpu-model: A100-SXM4-80GB."""
    prices: dict[str, float] = Field(default_factory=dict)
    """Hourly prices replacing the default's for these nodes (cpu per core, memory per
    GiB, gpu per device, any other resource per unit)."""
    reclaimable: ReclaimableSpec | None = None
    """Reclaimable nodes of this class (default: the sheet's multiplier)."""


class PricesSpec(SpecModel):
    """The prices."""

    default: dict[str, float] = Field(default_factory=dict)
    """Hourly prices of every node: cpu per core, memory per GiB, gpu per device, any
    other resource per unit (a resource left out of cpu, memory and gpu keeps its
    built-in price: 1, 0.125, 10; any other costs nothing)."""
    classes: list[PriceClassSpec] = Field(default_factory=list)
    """Node classes priced apart, first match wins."""
    reclaimable: ReclaimableSpec = Field(default_factory=ReclaimableSpec)
    """How reclaimable (spot-like) nodes are priced."""


class PricesDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Prices``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Prices"] = "Prices"
    """Always Prices."""
    spec: PricesSpec
    """The prices."""

    def to_domain(self) -> PriceSheet:
        """The price sheet; ``InvalidInput`` names a bad field."""
        spec = self.spec
        default = _rates(spec.default, "spec.default").over(DEFAULT_RATES)
        classes = tuple(
            PriceClass(
                name=cls.name,
                match=dict(cls.match),
                rates=_rates(cls.prices, f"spec.classes[{i}].prices"),
                reclaimable=None if cls.reclaimable is None else cls.reclaimable.multiplier,
            )
            for i, cls in enumerate(spec.classes)
        )
        return PriceSheet(default=default, classes=classes, reclaimable=spec.reclaimable.multiplier)


def _rates(prices: dict[str, float], where: str) -> Rates:
    for name, value in prices.items():
        canonical_amount(name, 0, field=f"{where}.{name}")  # refuses a bad name
        if value < 0:
            raise InvalidInput(
                f"{value!r} is not a price", field=f"{where}.{name}", fix="give a number >= 0"
            )
    return Rates(prices=prices)


def load_prices(text: str, *, source: str = "<prices>") -> PriceSheet:
    """The price sheet of a ``Prices`` document; ``DocumentError`` says what is wrong."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise DocumentError(
            f"{source}: not YAML: {error}".splitlines()[0],
            fix="check the YAML: indentation, quotes, brackets",
        ) from None
    try:
        return PricesDocument.model_validate(raw).to_domain()
    except ValidationError as error:
        raise document_error(f"{source} (Prices)", problems_of(error)) from None
    except InvalidInput as error:
        where = f"{error.field}: " if error.field else ""
        raise DocumentError(f"{source} (Prices): {where}{error.message}", fix=error.fix) from None


def read_prices(path: str | os.PathLike[str]) -> PriceSheet:
    """The price sheet in the file at ``path`` (see ``load_prices``)."""
    source = os.fspath(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_PRICES_BYTES + 1)
    except OSError as error:
        raise DocumentError(
            f"{source}: cannot read: {error.strerror}", fix="check the path and its permissions"
        ) from None
    if len(data) > MAX_PRICES_BYTES:
        raise DocumentError(f"{source}: over {MAX_PRICES_BYTES} bytes", fix="shorten it")
    return load_prices(data.decode("utf-8", errors="replace"), source=source)


def parse_short(text: str, *, field: str = "--prices") -> PriceSheet:
    """``cpu=1,memory=0.125,gpu=10`` as a sheet of default prices (a name left out
    keeps its built-in price); ``InvalidInput`` naming ``field`` and the fix."""
    given: dict[str, float] = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        name, _, price = pair.partition("=")
        try:
            given[name.strip()] = float(price)
        except ValueError:
            raise InvalidInput(
                f"{pair!r} is not name=price",
                field=field,
                fix="write cpu=1,memory=0.125,gpu=10, or give a Prices file",
            ) from None
    unknown = sorted(set(given) - {"cpu", "memory", "gpu"})
    if unknown:
        raise InvalidInput(
            f"{unknown[0]!r} is not priced",
            field=field,
            fix="price cpu, memory and gpu, or give a Prices file to price other resources",
        )
    for amount in given.values():
        if not 0 <= amount < float("inf"):
            raise InvalidInput(f"{amount!r} is not a price", field=field, fix="give a number >= 0")
    return PriceSheet(default=Rates(prices=given).over(DEFAULT_RATES))


__all__ = ["PricesDocument", "load_prices", "parse_short", "read_prices"]
