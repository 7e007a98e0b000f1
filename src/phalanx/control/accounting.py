"""Usage reports from the ledger: GPU-, CPU- and memory-hours, cost and savings.

Guarantees:
- an allocation counts for the part of ``[start, end)`` inside the report's
  ``[since, until)`` (an open one up to the report's ``now``; ``until`` defaults to
  ``now``): the hours of two reports over adjacent windows add up to one over both;
- GPU-hours are GPUs x hours, CPU-hours cores x hours, memory GiB x hours of what the
  task's role requested (what it held on its node, as a Slurm allocation counts);
- cost prices those hours at the rates of the node's class (``PriceSheet``, from the
  labels stored with the allocation), reclaimable nodes at theirs; ``saved`` is, for
  elastic roles on reclaimable nodes, what the same hours cost more on demand;
- rows are grouped ``by`` job, user, queue or allocation, sorted by key (allocations by
  start), and ``total`` is their sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final

from phalanx.control.store.usage import Allocation
from phalanx.domain.prices import PriceSheet
from phalanx.domain.resources import CPU, GPU, MEMORY

HOUR: Final = 3600.0


class By(StrEnum):
    """What a report's rows are."""

    JOB = "job"
    USER = "user"
    QUEUE = "queue"
    ALLOCATION = "allocation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """One row of a report (see the module docstring). ``job``, ``user`` and ``queue``
    are set where all of the row's allocations agree; the ``allocation`` fields only on
    a row by allocation."""

    key: str
    job: str | None = None
    user: str | None = None
    queue: str | None = None
    allocations: int = 0
    hours: float = 0.0  # task-hours held
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    memory_gib_hours: float = 0.0
    cost: float = 0.0
    saved: float = 0.0
    task: str | None = None
    node: str | None = None
    price_class: str | None = None
    reclaimable: bool | None = None
    start: float | None = None
    end: float | None = None
    ended_by: str | None = None
    resources: Mapping[str, float] = field(default_factory=dict)


def held_seconds(
    allocation: Allocation, *, since: float | None, until: float | None, now: float
) -> float:
    """How long ``allocation`` was held within ``[since, until)`` (open: up to ``now``)."""
    end = now if allocation.end is None else allocation.end
    if until is not None:
        end = min(end, until)
    start = allocation.start if since is None else max(allocation.start, since)
    return max(0.0, end - start)


def priced(
    allocation: Allocation,
    sheet: PriceSheet,
    *,
    since: float | None,
    until: float | None,
    now: float,
) -> Usage:
    """One allocation's row, its hours clipped to the window."""
    hours = held_seconds(allocation, since=since, until=until, now=now) / HOUR
    amounts = allocation.resources
    cls = sheet.price_class(allocation.labels)
    rates = sheet.rates(cls, reclaimable=allocation.reclaimable)
    saves = allocation.reclaimable and allocation.elastic
    return Usage(
        key=f"{allocation.job}/{allocation.task}",
        job=allocation.job,
        user=allocation.user,
        queue=allocation.queue,
        allocations=1,
        hours=hours,
        gpu_hours=amounts.get(GPU, 0.0) * hours,
        cpu_hours=amounts.get(CPU, 0.0) / 1000.0 * hours,
        memory_gib_hours=amounts.get(MEMORY, 0.0) / 2**30 * hours,
        cost=rates.cost(amounts, hours),
        saved=sheet.saving(cls, amounts, hours) if saves else 0.0,
        task=allocation.task,
        node=allocation.node,
        price_class=cls,
        reclaimable=allocation.reclaimable,
        start=allocation.start,
        end=allocation.end,
        ended_by=allocation.ended_by or None,
        resources=dict(amounts),
    )


def _add(total: Usage, row: Usage) -> Usage:
    return replace(
        total,
        job=total.job if total.job == row.job else None,
        user=total.user if total.user == row.user else None,
        queue=total.queue if total.queue == row.queue else None,
        allocations=total.allocations + row.allocations,
        hours=total.hours + row.hours,
        gpu_hours=total.gpu_hours + row.gpu_hours,
        cpu_hours=total.cpu_hours + row.cpu_hours,
        memory_gib_hours=total.memory_gib_hours + row.memory_gib_hours,
        cost=total.cost + row.cost,
        saved=total.saved + row.saved,
    )


def _group(row: Usage, key: str) -> Usage:
    """An aggregate row keyed ``key`` holding ``row``'s sums alone."""
    empty = Usage(key=key, job=row.job, user=row.user, queue=row.queue)
    return _add(empty, row)


def report(
    allocations: Iterable[Allocation],
    sheet: PriceSheet,
    *,
    by: By,
    since: float | None,
    until: float | None,
    now: float,
) -> tuple[list[Usage], Usage]:
    """The rows ``by`` what was asked and their total (see the module docstring)."""
    until = now if until is None else until
    rows = [priced(a, sheet, since=since, until=until, now=now) for a in allocations]
    total = Usage(key="total")
    for row in rows:
        total = _add(total, row) if total.allocations else _group(row, "total")
    if by is By.ALLOCATION:
        return sorted(rows, key=lambda r: (r.start or 0.0, r.key)), total
    groups: dict[str, Usage] = {}
    for row in rows:
        key = {By.JOB: row.job, By.USER: row.user, By.QUEUE: row.queue}[by] or ""
        groups[key] = _add(groups[key], row) if key in groups else _group(row, key)
    return [groups[key] for key in sorted(groups)], total
