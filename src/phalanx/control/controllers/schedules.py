"""Cron schedules of pipelines: the runs their firings start.

The workflow controller calls ``fire_due`` on every tick, in one transaction. For every
registered pipeline with a ``schedule``, the firings after its ``scheduled_through`` and
at or before ``now`` are due. Guarantees:

- Only the latest due firing starts a run; earlier ones are skipped and logged (the
  server was down, or a tick was late), as a Kubernetes CronJob catches up once. A
  firing more than ``CATCH_UP`` seconds old is not started at all.
- The run belongs to the pipeline's owner, takes every param's default (a scheduled
  pipeline must give each one: its document is refused otherwise) and uses the step
  cache. Its id is ``NAME-YYYYMMDDHHMM`` of the firing (UTC), so one firing never
  starts two runs, even across a restart.
- ``concurrencyPolicy`` weighs the pipeline's scheduled runs still Pending or Running:
  ``allow`` starts another, ``skip`` starts none for this firing, ``replace`` asks them
  to stop (their finally steps run) and starts the new one.
- ``scheduled_through`` moves to ``now``; registering or updating a pipeline sets it to
  that time, so a schedule never fires for a time before it was given.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from phalanx.control.controllers.runs import new_run
from phalanx.control.store import Session
from phalanx.control.store import runs as stored_runs
from phalanx.control.store.models import RunRow
from phalanx.spec.pipeline import CronSchedule, PipelineDocument, resolve
from phalanx.spec.pipeline.parts import ScheduleSpec

log = logging.getLogger(__name__)

#: Firings older than this (seconds) when they are noticed are not started.
CATCH_UP: Final = 86_400.0


def latest_firing(cron: CronSchedule, after: float, now: float) -> tuple[float | None, int]:
    """The latest firing of ``cron`` in ``(after, now]`` no older than ``CATCH_UP``,
    and how many firings of that window it passes over (0 or more)."""
    moment = datetime.fromtimestamp(max(after, now - CATCH_UP), UTC)
    latest: float | None = None
    passed = 0
    while (found := cron.next_after(moment).timestamp()) <= now:
        if latest is not None:
            passed += 1
        latest, moment = found, datetime.fromtimestamp(found, UTC)
    return latest, passed


def schedule_of(document: Mapping[str, Any]) -> ScheduleSpec | None:
    """The ``schedule`` of a stored pipeline document (validated when it was stored), read
    without validating the rest of the document again."""
    found = document.get("spec", {}).get("schedule")
    return None if not found else ScheduleSpec.model_validate(found)


def next_firing(schedule: ScheduleSpec | None, after: float) -> float | None:
    """When ``schedule`` next fires after ``after`` (None: no schedule)."""
    if schedule is None:
        return None
    moment = datetime.fromtimestamp(after, UTC)
    return CronSchedule.parse(schedule.cron).next_after(moment).timestamp()


def fire_due(session: Session, now: float) -> list[str]:
    """Start the runs due (see the module docstring); the ids of those started."""
    started = []
    for row in stored_runs.pipelines(session):
        schedule = schedule_of(row.document)
        if schedule is None:
            continue
        through = row.scheduled_through if row.scheduled_through is not None else row.updated_at
        firing, passed = latest_firing(CronSchedule.parse(schedule.cron), through, now)
        row.scheduled_through = now
        if firing is None:
            continue
        if passed:
            log.warning(
                "pipeline %s: %d earlier firing(s) of its schedule skipped", row.name, passed
            )
        run_id = _run_id(row.name, firing)
        if session.get(RunRow, run_id) is not None:
            continue  # started before a restart
        active = stored_runs.active_scheduled(session, row.name)
        policy = schedule.concurrency_policy
        if active and policy == "skip":
            log.info("pipeline %s: firing skipped, runs still under way: %s", row.name, active)
            continue
        if active and policy == "replace":
            stored_runs.request_stop(session, active)
        document = PipelineDocument.model_validate(row.document)  # only when it fires
        params = resolve(document.spec.declared_params(), {})
        session.add(
            new_run(
                run_id,
                pipeline=row.name,
                document=row.document,
                user=row.user,
                params=params,
                created_at=now,
                scheduled_at=firing,
            )
        )
        started.append(run_id)
    return started


def _run_id(name: str, firing: float) -> str:
    stamp = datetime.fromtimestamp(firing, UTC).strftime("%Y%m%d%H%M")
    return f"{name[:40].strip('-.')}-{stamp}"
