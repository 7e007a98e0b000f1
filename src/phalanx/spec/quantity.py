"""Resource maps in documents: ``{cpu: 8, memory: 32Gi, gpu: 0.5, rdma/hca: 1}``.

A ``ResourceMap`` keeps what the person wrote (so a document renders back as
written) and is guaranteed to convert with ``resources_of`` into a domain
``Resources`` in canonical units: every name and quantity was checked by the same
rules as ``phalanx.domain.resources.canonical_amount``, and no quantity is over
``MAX_QUANTITY`` of its base unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, TypeAlias

from pydantic import AfterValidator, PlainValidator

from phalanx.domain.errors import QuantityError
from phalanx.domain.resources import Resources, canonical_amount, parse_quantity
from phalanx.spec.common import from_invalid, located
from phalanx.spec.limits import MAX_QUANTITY

QuantityValue: TypeAlias = str | int | float

_QUANTITY_FIX = "write a number with an optional suffix, e.g. 500m, 1.5, 16Gi"


def _check_name(name: str) -> str:
    try:
        canonical_amount(name, 0)  # the domain owns the naming rule; zero always parses
    except QuantityError as error:
        raise from_invalid(error) from None
    return name


def _check_quantity(value: object) -> QuantityValue:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise located(f"expected a quantity, got {type(value).__name__}", _QUANTITY_FIX)
    try:
        amount = parse_quantity(value)
    except QuantityError as error:
        raise from_invalid(error) from None
    if amount > MAX_QUANTITY:
        raise located(
            f"{str(value)[:40]!r} is more than the largest quantity, 2^63 ({MAX_QUANTITY:.3g})",
            "write at most 2^63 of the base unit (8Ei of memory)",
        )
    return value


#: One resource name of a map (``cpu``, ``memory``, ``gpu``, ``rdma/hca`` ...).
ResourceName = Annotated[str, AfterValidator(_check_name)]

#: One Kubernetes-style quantity (``500m``, ``16Gi``, ``1.5``, ``8``).
Quantity = Annotated[
    QuantityValue, PlainValidator(_check_quantity, json_schema_input_type=QuantityValue)
]

#: A mapping resource name -> quantity, as written in a document.
ResourceMap: TypeAlias = dict[ResourceName, Quantity]


def resources_of(amounts: Mapping[str, QuantityValue], *, field: str = "resources") -> Resources:
    """The canonical ``Resources`` of a validated map (cpu in millicores, memory in bytes)."""
    return Resources.parse(amounts, field=field)
