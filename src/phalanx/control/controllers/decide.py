"""Applying a session's Decisions: admissions, evictions, placements and pending reasons."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from phalanx.control.controllers import lifecycle
from phalanx.control.controllers.core import Core
from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.engine.decisions import Bind, Decisions, Evict

_Item = TypeVar("_Item", Bind, Evict)
_WAITING = (JobPhase.PENDING, JobPhase.QUEUED)


def apply(core: Core, decisions: Decisions) -> None:
    """Record what the session decided and hand binds and evictions to the executor."""
    for admit in decisions.admitted:
        job = core.jobs[admit.job]
        core.set_phase(job, JobPhase.QUEUED, "Admitted", f"admitted to queue {job.job.queue}")
    for name, evictions in _by_job(decisions.evictions).items():
        _evict(core, name, evictions)
    for name, binds in _by_job(decisions.binds).items():
        _place(core, name, binds)
    for item in decisions.unschedulable:
        waiting = core.jobs.get(item.job)
        key = (item.reason.code.value, item.reason.message)
        if waiting is not None and waiting.reason != key and waiting.phase in _WAITING:
            waiting.reason = key
            core.journal.job(waiting.id, reason=key[0], message=key[1])


def _evict(core: Core, name: str, evictions: list[Evict]) -> None:
    job = core.jobs[name]
    first = evictions[0]
    tasks = {t.name: t for t in core.tasks(job)}
    job.preemptions += 1
    core.journal.job(job.id, preemptions=job.preemptions)
    message = f"{first.action}ed by {first.by}: {first.reason}"
    core.journal.event(job.id, core.now, "Evicted", f"{len(evictions)} task(s) {message}")
    core.stop(
        [tasks[e.task] for e in evictions if e.task in tasks],
        action=first.action,
        by=first.by,
        reason=first.reason,
    )
    lifecycle.restart_if_broken(core, job, message)


def _place(core: Core, name: str, binds: list[Bind]) -> None:
    job = core.jobs[name]
    tasks = {t.name: t for t in core.tasks(job)}
    for bind in binds:
        core.set_task(tasks[bind.task], TaskPhase.BOUND, node=bind.node, gpus=bind.gpus)
    if job.started_at is None:
        job.started_at = core.now
        core.journal.job(job.id, started_at=core.now)
    nodes = sorted({b.node for b in binds})
    message = f"{len(binds)} task(s) placed on {', '.join(nodes[:8])}" + (
        f" and {len(nodes) - 8} more nodes" if len(nodes) > 8 else ""
    )
    job.reason = None
    if job.phase is JobPhase.PENDING:  # a config without enqueue admits by placing
        core.set_phase(job, JobPhase.QUEUED, "Admitted", f"admitted to queue {job.job.queue}")
    if job.phase is JobPhase.RUNNING:
        core.journal.event(job.id, core.now, "Placed", message)
    else:
        core.set_phase(job, JobPhase.RUNNING, "Placed", message)
    lifecycle.launch(core, job, binds)


def _by_job(items: Iterable[_Item]) -> dict[str, list[_Item]]:
    grouped: dict[str, list[_Item]] = {}
    for item in items:
        grouped.setdefault(item.job, []).append(item)
    return grouped
