"""Rollouts under way, advanced one pass at a time: ``RolloutDriver``.

The serving controller calls ``advance`` at the start of each of its passes (on its
thread, before it reads the services), so a rollout's change of a service's document
and of its replicas is seen whole by the pass that follows. For each rollout under way,
in this order:
- asked to stop (``abort_by``): rolled back;
- the canary has had no Ready replica for ``readyTimeout`` (since the rollout started,
  or since its last Ready replica went): rolled back;
- its window (the canary's answers at the gateway since the step began, ``Tallies``)
  holds at least ``minRequests`` requests and its 5xx share is over ``maxErrorRate`` or
  its p99 latency over ``maxP99``: rolled back at once, before the step's interval ends;
- once the step has lasted ``interval``: with fewer than ``minRequests`` requests in its
  window it waits for more (its reason says how many came); otherwise it is promoted to
  the next step, or, after the last (100%), completed: the predictor takes the new
  version, the canary's replicas become the predictor's (no new cold start) and the
  predictor's old replicas are stopped.
A rollback removes the canary from the document and gives the predictor its traffic
back; the serving pass then stops the canary's replicas. Every action is one entry of
the rollout's history, with the window's figures and the reason. A server restart starts
the current step's window again (the tallies live in the gateway's memory).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from phalanx.control.store import Session
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import rollouts as stored
from phalanx.control.store import services as stored_services
from phalanx.control.store.database import Database
from phalanx.control.store.models import RolloutRow, ServiceRow
from phalanx.gateway.tallies import Tally
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.rollout import RolloutSpec, promoted, rolled_back, split

log = logging.getLogger(__name__)

#: The quantile a rollout's latency threshold is about.
QUANTILE: Final = 0.99

Reading = Callable[[str, str], Tally]


@dataclass(frozen=True, slots=True)
class Window:
    """A step's window so far: when it began, and the canary's tally then."""

    began: float
    tally: Tally


def judge(window: Tally, spec: RolloutSpec) -> str | None:
    """Why the canary's ``window`` fails ``spec``'s thresholds, or None (also while it
    holds fewer than ``minRequests`` requests: too few to judge)."""
    if window.requests < spec.min_requests:
        return None
    if window.error_rate > spec.max_error_rate:
        return (
            f"error rate {window.error_rate:.1%} is over the most {spec.max_error_rate:.1%} "
            f"({window.errors} of {window.requests} requests answered 5xx)"
        )
    p99 = window.quantile(QUANTILE)
    if spec.max_p99 is not None and p99 is not None and p99 > spec.max_p99:
        return (
            f"p99 latency {p99 * 1000:.0f} ms is over the most {spec.max_p99 * 1000:.0f} ms "
            f"({window.requests} requests)"
        )
    return None


class RolloutDriver:
    """See the module docstring. ``reading(service, predictor)`` is the gateway's tally
    of a predictor's answers so far."""

    def __init__(
        self, db: Database, reading: Reading, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self._reading = reading
        self._clock = clock
        self._windows: dict[tuple[int, int], Window] = {}  # (rollout, step) -> its window
        self._unready_since: dict[int, float] = {}  # rollout -> when its canary lost Ready

    def advance(self) -> None:
        """One pass over the rollouts under way (see the module docstring)."""
        with self.db.write() as session:
            rows = stored.progressing(session)
            for row in rows:
                service = stored_services.get(session, row.service)
                if service is not None:
                    self._advance(session, row, service)
            live = {row.id for row in rows if row.phase == stored.PROGRESSING}
        self._windows = {k: v for k, v in self._windows.items() if k[0] in live}
        self._unready_since = {k: v for k, v in self._unready_since.items() if k in live}

    def _advance(self, session: Session, row: RolloutRow, service: ServiceRow) -> None:
        now = self._clock()
        spec = RolloutSpec.model_validate(row.settings)
        if row.abort_by is not None:
            self._roll_back(session, row, service, f"stopped by {row.abort_by}", "aborted")
            return
        tally = self._reading(row.service, row.canary)
        window = self._windows.setdefault((row.id, row.step), Window(now, tally))
        figures = tally.since(window.tally)
        unready = self._unready(session, row, now)
        if unready is not None and unready >= spec.ready_timeout:
            why = f"the new version had no Ready replica for {unready:.0f} s"
            self._roll_back(session, row, service, why, "rolled-back", figures)
            return
        failed = judge(figures, spec)
        if failed is not None:
            self._roll_back(session, row, service, failed, "rolled-back", figures)
            return
        share = row.steps[row.step]
        left = window.began + spec.interval - now
        if left > 0:
            row.reason = (
                f"step {row.step + 1} of {len(row.steps)}: {share}% for {spec.interval:g} s, "
                f"{left:.0f} s left; {figures.requests} requests, {figures.errors} errors"
            )
        elif figures.requests < spec.min_requests:
            row.reason = (
                f"step {row.step + 1} of {len(row.steps)}: waiting for requests to judge it "
                f"({figures.requests} of the {spec.min_requests} needed)"
            )
        elif row.step + 1 < len(row.steps):
            self._promote(session, row, service, figures, now)
        else:
            self._complete(session, row, service, figures)

    def _unready(self, session: Session, row: RolloutRow, now: float) -> float | None:
        """How long the canary has had no Ready replica (None: it has one)."""
        replicas = stored_services.replicas(session, [row.service])
        if any(r.ready for r in replicas if r.predictor == row.canary):
            if row.ready_at is None:
                row.ready_at = now
            self._unready_since.pop(row.id, None)
            return None
        if row.ready_at is None:
            return now - row.started_at
        return now - self._unready_since.setdefault(row.id, now)

    def _promote(
        self, session: Session, row: RolloutRow, service: ServiceRow, figures: Tally, now: float
    ) -> None:
        row.step += 1
        share = row.steps[row.step]
        document = split(
            _document(service),
            row.predictor,
            row.canary,
            row.to_version,
            base=row.base_traffic,
            share=share,
        )
        _store(service, document, now)
        row.step_started_at = now
        row.reason = f"step {row.step + 1} of {len(row.steps)}: {share}% from now"
        self._windows[(row.id, row.step)] = Window(now, self._reading(row.service, row.canary))
        _log(
            row, now, "promoted", share, f"the last step's window passed: {_said(figures)}", figures
        )

    def _complete(
        self, session: Session, row: RolloutRow, service: ServiceRow, figures: Tally
    ) -> None:
        now = self._clock()
        document = promoted(
            _document(service), row.predictor, row.canary, row.to_version, base=row.base_traffic
        )
        old = list(stored_services.replica_jobs(session, row.service, row.predictor))
        stored_jobs.request_cancel(session, old, delete=True)
        stored_services.remove_replicas(session, old)
        stored_services.move_replicas(session, row.service, row.canary, row.predictor)
        _store(service, document, now)
        why = f"{row.predictor} serves {row.to_version}: {_said(figures)} at 100%"
        _end(row, "Succeeded", why, now)
        _log(row, now, "completed", 100, why, figures)

    def _roll_back(
        self,
        session: Session,
        row: RolloutRow,
        service: ServiceRow,
        why: str,
        action: str,
        figures: Tally | None = None,
    ) -> None:
        now = self._clock()
        document = rolled_back(_document(service), row.predictor, row.canary, base=row.base_traffic)
        _store(service, document, now)
        reason = f"rolled back to {row.from_version}: {why}"
        _end(row, "RolledBack", reason, now)
        _log(row, now, action, 0, why, figures)
        log.warning("service %s: rollout %d %s", row.service, row.id, reason)


def _document(service: ServiceRow) -> InferenceDocument:
    return InferenceDocument.model_validate(service.document)


def _store(service: ServiceRow, document: InferenceDocument, now: float) -> None:
    service.document = document.model_dump(mode="json", by_alias=True, exclude_none=True)
    service.updated_at = now


def _end(row: RolloutRow, phase: str, reason: str, now: float) -> None:
    row.phase, row.reason, row.finished_at = phase, reason, now


def _said(figures: Tally) -> str:
    p99 = figures.quantile(QUANTILE)
    latency = "" if p99 is None else f", p99 {p99 * 1000:.0f} ms"
    return f"{figures.requests} requests, {figures.errors} errors{latency}"


def _log(
    row: RolloutRow, at: float, action: str, traffic: int, reason: str, figures: Tally | None
) -> None:
    """Append one entry to ``row``'s history (a new list: the JSON column sees it)."""
    entry: dict[str, Any] = {
        "at": at,
        "action": action,
        "traffic": traffic,
        "reason": reason,
    }
    if figures is not None:
        p99 = figures.quantile(QUANTILE)
        entry |= {"requests": figures.requests, "errors": figures.errors, "p99_seconds": p99}
    row.history = [*row.history, entry]
