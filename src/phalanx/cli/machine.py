"""What ``-o json`` and ``-o yaml`` print: the API's objects, written as documents are.

One rule for every kind (jobs, tasks, queues, nodes, users, tokens):

- a resource map (``requests``, ``allocated``, ``capacity``, ``guarantee``,
  ``deserved``, ``configured_deserved``, ``capability``) holds quantities as documents write them, as strings:
  ``cpu: "32"``, ``cpu: 500m``, ``memory: 256Gi``, ``gpu: "0.5"`` (exact: an amount a
  suffix cannot say exactly is given in the base unit, ``memory: "1000000001"``);
- a time (``created_at``, ``updated_at``, ``started_at``, ``finished_at``,
  ``expires_at``, an event's ``time``) is RFC 3339 in UTC, to the second: ``2026-11-25T23:02:00Z``;
- every object with such fields also carries ``canonical``: those same fields as the
  API gives them (cpu in millicores, memory in bytes, times in seconds since the
  epoch, exact), for programs that compute with them.

A job's or queue's ``document`` is printed as it is stored: as its user wrote it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Final

from phalanx.domain.resources import CPU, GPU_MEMORY, MEMORY

#: Fields holding a resource map in canonical units.
QUANTITY_FIELDS: Final = frozenset(
    {
        "requests",
        "allocated",
        "capacity",
        "guarantee",
        "deserved",
        "configured_deserved",
        "capability",
    }
)
#: Fields holding a time in seconds since the epoch.
TIME_FIELDS: Final = frozenset(
    {"created_at", "updated_at", "started_at", "finished_at", "expires_at", "time"}
)
#: Where an object keeps the API's values of the fields rewritten above.
CANONICAL: Final = "canonical"
#: Fields printed as they are, whatever they hold.
AS_STORED: Final = frozenset({"document"})

_BINARY: Final = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


def written(data: Any) -> Any:
    """``data`` (JSON-like: the API's objects as ``model_dump(mode="json")`` gives them)
    with quantities and times written for people, and each object's ``canonical``."""
    if isinstance(data, list):
        return [written(item) for item in data]
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    canonical: dict[str, Any] = {}
    for key, value in data.items():
        if key in AS_STORED:
            out[key] = value
        elif key in QUANTITY_FIELDS and isinstance(value, dict):
            out[key] = {name: quantity(name, amount) for name, amount in value.items()}
            canonical[key] = value
        elif key in TIME_FIELDS and isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = rfc3339(value)
            canonical[key] = value
        else:
            out[key] = written(value)
    if canonical:
        out[CANONICAL] = canonical
    return out


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as RFC 3339 in UTC, to the second."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity(name: str, amount: Any) -> Any:
    """A canonical ``amount`` of resource ``name`` as a document writes it, exactly:
    cores (or millicores) for cpu, binary suffixes for bytes, the number otherwise."""
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return amount
    if math.isinf(amount):
        return "unlimited"
    if name == CPU:
        if amount % 1000 == 0:
            return _number(amount / 1000)
        return f"{_number(amount)}m"
    if name in (MEMORY, GPU_MEMORY) and amount == int(amount):
        whole = int(amount)
        for suffix, unit in _BINARY:
            if whole >= unit and whole % unit == 0:
                return f"{whole // unit}{suffix}"
            if whole >= unit and (whole * 4) % unit == 0:  # 1.5Gi, 0.25 steps
                return f"{_number(whole / unit)}{suffix}"
    return _number(amount)


def _number(value: float) -> str:
    """``value`` without a needless ``.0``, exactly (``repr`` when ``:g`` would round)."""
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    short = f"{value:g}"
    return short if float(short) == value else repr(value)
