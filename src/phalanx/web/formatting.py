"""How the console writes numbers and times: quantities in the units people read
(cores, GiB, GPUs), times in UTC. Template filters, registered by name in ``FILTERS``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from phalanx.spec.queue import QueueDocument, limits_summary

_GI: Final = 1024**3


def amount(value: float, resource: str) -> str:
    """``value`` of ``resource`` as people read it: the API gives CPU in millicores and
    memory in bytes."""
    if resource == "cpu":
        return _number(value / 1000)
    if resource in ("memory", "gpu-memory"):
        return f"{_number(value / _GI)}Gi"
    return _number(value)


def _number(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def gib(count: float) -> str:
    """Bytes as GiB without the unit, one decimal below 100 (``12.5``, ``0.3``, ``141``):
    a card's memory as people read it."""
    value = count / _GI
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def utc(epoch: float | None) -> str:
    """An epoch time as ``2026-11-25 23:02:00``, UTC ("" for None)."""
    if epoch is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))


def duration(start: float | None, end: float | None = None) -> str:
    """From ``start`` to ``end`` (now when None), as ``3h12m``, ``4m05s`` or ``12s``."""
    if start is None:
        return ""
    seconds = int(max(0.0, (end if end is not None else time.time()) - start))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"


def percent(part: float, whole: float) -> str:
    """``part`` of ``whole`` as a CSS width (``"37.5%"``), within 0..100."""
    if whole <= 0:
        return "0%"
    return f"{min(100.0, max(0.0, 100.0 * part / whole)):.1f}%"


def counts(tally: dict[str, int]) -> str:
    """Task counts by phase: ``2 Running, 1 Pending``."""
    return ", ".join(f"{n} {phase}" for phase, n in sorted(tally.items()) if n)


def seconds(value: float | None) -> str:
    """A span of seconds (a latency, an interval) as ``850 ms`` below a second, ``1.25 s``
    from there ("" for None: not measured)."""
    if value is None:
        return ""
    if value < 1:
        return f"{_number(round(value * 1000, 1))} ms"
    return f"{_number(value)} s"


def version(reference: str) -> str:
    """A pinned model version without its digest: ``mnist:v1@sha256:...`` -> ``mnist:v1``
    (the page that shows one version in full shows the digest)."""
    return reference.partition("@")[0]


def queue_limits(document: dict[str, Any]) -> list[tuple[str, str]]:
    """A queue's per-user limits and budget, as ``phalanx describe queue`` says them,
    from its stored document (none for a queue without any)."""
    return limits_summary(QueueDocument.model_validate(document).spec)


FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "amount": amount,
    "gib": gib,
    "utc": utc,
    "duration": duration,
    "percent": percent,
    "counts": counts,
    "seconds": seconds,
    "version": version,
    "queue_limits": queue_limits,
}
