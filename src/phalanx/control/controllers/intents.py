"""What people asked of the controller through the store: ``Intent`` and ``Intents``.

The API writes intent to the store (a new job, a cancel, a new size, a queue, a node's
flags) and calls ``wake`` naming what it changed; the next tick reads that alone, and
everything once a period, so a writer outside this process is seen too.

Guarantees of ``Intents.read``:

- a job the API stored is taken in exactly once: its ``ingested`` flag is written in
  the tick that submits it to the lifecycle, and a job already known is skipped;
- a job whose model versions or datasets could not be made ready for its tasks
  (``model_fetch`` failed) is taken in failed, with the reason;
- jobs this process's API just committed (``offer``) are taken as they are, not read
  and validated again; an offer newer than every row the tick read waits for the next;
- a cancel or a new size is handed to the lifecycle each tick the store asks for it
  (a size request is cleared once handed on); each job's trouble is that job's alone
  (through the caller's guard).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any, Final, TypeVar

from phalanx.control.controllers.core import Core, Rows
from phalanx.control.store import Session
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.model_versions import FAILED
from phalanx.domain.job import Job
from phalanx.spec.job import JobDocument

#: New jobs taken in by one tick at most (the rest wait for the next).
INGEST_BATCH: Final = 10_000

_Arg = TypeVar("_Arg")
#: Runs ``handle(arg)`` for a job, failing that job alone if it raises.
Guard = Callable[[str, Callable[[_Arg], None], _Arg], None]


class Intent(StrEnum):
    """What the API changed in the store, for ``Controller.wake``."""

    JOBS = "jobs"  # new jobs
    CANCELS = "cancels"  # cancel requests
    SCALES = "scales"  # new sizes of elastic roles
    QUEUES = "queues"  # queue documents
    NODES = "nodes"  # cordon, drain


class Intents:
    """What changed since the last tick, and the jobs offered meanwhile (thread-safe:
    the API's threads call ``wake`` and ``offer``, the controller's the rest)."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._lock = threading.Lock()
        self._changed: set[Intent] = set(Intent)
        self._wakes = 0  # calls of ``wake`` since ``take_wakes``
        self._offered: dict[int, Job] = {}  # jobs committed by this process's API, by row id
        self._full_read_at = 0.0

    def wake(self, changed: Sequence[Intent]) -> None:
        """Note what a caller changed (nothing named: everything)."""
        with self._lock:
            self._changed.update(changed or Intent)
            self._wakes += 1

    def take_wakes(self) -> int:
        """How many ``wake`` calls came since the last call of this."""
        with self._lock:
            wakes, self._wakes = self._wakes, 0
            return wakes

    def offer(self, stored: Sequence[tuple[int, Job]]) -> None:
        """Jobs this process just committed, by row id: the next tick takes them as
        they are instead of reading and validating their documents again."""
        with self._lock:
            self._offered.update(stored)

    def take(self, now: float, period: float) -> tuple[set[Intent], bool]:
        """What changed since the last call, and whether this is a period's full read
        (then everything counts as changed)."""
        with self._lock:
            changed, self._changed = self._changed, set()
        if now - self._full_read_at >= period:
            self._full_read_at = now
            return set(Intent), True
        return changed, False

    def read(self, session: Session, changed: set[Intent], guarded: Guard[Any]) -> None:
        """Hand the new jobs, cancels and sizes among ``changed`` to the lifecycle."""
        if Intent.JOBS in changed:
            self._ingest(session, guarded)
        if Intent.CANCELS in changed:
            for name in stored_jobs.cancel_requested(session):
                guarded(name, self._cancel, name)
        if Intent.SCALES in changed:
            for row_id, name, document in stored_jobs.scale_requested(session):
                guarded(name, self._scale, (name, document))
                self._core.journal.job(row_id, scale_requested=False)

    def _ingest(self, session: Session, guarded: Guard[Any]) -> None:
        """Take in the jobs the API stored since the last tick (plain column reads: a new
        job's other columns still hold their defaults)."""
        with self._lock:
            offered, self._offered = self._offered, {}
        rows = stored_jobs.not_ingested(session, limit=INGEST_BATCH)
        # An offer newer than every row read was committed after this read began: kept for
        # the next tick. Older offers not read were taken in already, or deleted: dropped.
        newest = rows[-1].id if rows else -1
        later = {job_id: job for job_id, job in offered.items() if job_id > newest}
        if later:
            with self._lock:
                self._offered.update(later)
        if not rows:
            return
        # Jobs stored by another process (or before a restart) are read from the store.
        created = {row.id: row.created_at for row in rows if row.id not in offered}
        if created:
            for job_id, document in stored_jobs.documents(session, created).items():
                spec = JobDocument.model_validate(document)
                offered[job_id] = spec.to_domain(creation_time=created[job_id])
        task_ids = stored_jobs.task_ids(session, rows[0].id, rows[-1].id)
        core = self._core
        for row in rows:
            core.journal.job(row.id, ingested=True)
            if row.name in core.rows:  # taken in already; the flag was not yet written
                continue
            core.rows[row.name] = Rows(id=row.id, tasks=task_ids.get(row.id, {}))
            if row.model_fetch == FAILED:
                guarded(row.name, self._refuse, offered[row.id])
            else:
                guarded(row.name, self._submit, offered[row.id])

    def _submit(self, job: Job) -> None:
        core = self._core
        core.record(core.life.submit(job, now=core.now))
        core.decided = True

    def _refuse(self, job: Job) -> None:
        """Take in ``job`` failed: a model version or dataset its tasks read could not be
        made ready for them (``controllers.model_fetch``; its events say which and why)."""
        core = self._core
        core.record(core.life.submit(job, now=core.now))
        message = (
            "a model version or dataset its tasks read could not be made ready (its events say why)"
        )
        core.record(core.life.abort(job.name, message, now=core.now))
        core.decided = True

    def _cancel(self, name: str) -> None:
        core = self._core
        core.record(core.life.cancel(name, "cancelled by request", now=core.now))

    def _scale(self, asked: tuple[str, dict[str, Any]]) -> None:
        """Apply the size the job's stored document now asks of its elastic role."""
        name, document = asked
        role = JobDocument.model_validate(document).to_domain(creation_time=0.0).elastic_role()
        if role is None:
            return
        core = self._core
        message = f"scaled to {role.replicas} by its owner"
        core.record(core.life.scale(name, role.replicas, message, now=core.now))
