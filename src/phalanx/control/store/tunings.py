"""Right-sizing experiments in the store: every query of ``TuningRow`` and ``TrialRow``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import JobRow, TaskRow, TrialRow, TuningRow

#: A tuning's phases.
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
STOPPED: Final = "Stopped"
ENDED: Final = frozenset({SUCCEEDED, FAILED, STOPPED})
#: A trial's states: its replica asked for, measured, then one of the four ends.
PENDING: Final = "Pending"
MEASURING: Final = "Running"
COMPLETE: Final = "Complete"
TRIAL_FAILED: Final = "Failed"
UNPLACEABLE: Final = "Unplaceable"
TRIAL_STOPPED: Final = "Stopped"
TRIAL_ENDED: Final = frozenset({COMPLETE, TRIAL_FAILED, UNPLACEABLE, TRIAL_STOPPED})


def get(session: Session, name: str) -> TuningRow | None:
    """Tuning ``name``, or None."""
    return session.get(TuningRow, name)


def listing(session: Session, user: str | None) -> Sequence[TuningRow]:
    """``user``'s tunings (None: everyone's), by name."""
    query = select(TuningRow).order_by(TuningRow.name)
    if user is not None:
        query = query.where(TuningRow.user == user)
    return session.scalars(query).all()


def running(session: Session) -> Sequence[TuningRow]:
    """The tunings under way, by name."""
    query = select(TuningRow).where(TuningRow.phase == RUNNING).order_by(TuningRow.name)
    return session.scalars(query).all()


def add(session: Session, name: str, user: str, document: dict[str, Any], *, now: float) -> None:
    """Record a new tuning, Running."""
    session.add(
        TuningRow(
            name=name,
            user=user,
            document=document,
            phase=RUNNING,
            message="",
            trials_made=0,
            created_at=now,
            updated_at=now,
        )
    )


def end(session: Session, name: str, phase: str, message: str, *, now: float) -> bool:
    """End tuning ``name`` with ``phase`` unless it ended already; whether it did now."""
    result = session.execute(
        update(TuningRow)
        .where(TuningRow.name == name, TuningRow.phase == RUNNING)
        .values(phase=phase, message=message[:2000], updated_at=now, ended_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0) > 0


def remove(session: Session, name: str) -> bool:
    """Forget tuning ``name`` and its trials; False when there was none."""
    session.execute(delete(TrialRow).where(TrialRow.tuning == name))
    result = session.execute(delete(TuningRow).where(TuningRow.name == name))
    return int(getattr(result, "rowcount", 0) or 0) > 0


def trials(session: Session, tuning: str) -> Sequence[TrialRow]:
    """Tuning ``tuning``'s trials, by number."""
    query = select(TrialRow).where(TrialRow.tuning == tuning).order_by(TrialRow.number)
    return session.scalars(query).all()


def add_trial(
    session: Session, tuning: str, number: int, params: dict[str, Any], *, now: float
) -> TrialRow:
    """A new Pending trial ``number`` of ``tuning`` with candidate ``params``."""
    row = session.get(TuningRow, tuning)
    assert row is not None, tuning
    row.trials_made = max(row.trials_made, number + 1)
    trial = TrialRow(
        tuning=tuning,
        number=number,
        params=params,
        state=PENDING,
        message="",
        metrics=[],
        created_at=now,
    )
    session.add(trial)
    return trial


def update_trial(session: Session, tuning: str, number: int, **values: Any) -> None:
    """Set ``values`` on trial ``number`` of ``tuning``."""
    session.execute(
        update(TrialRow)
        .where(TrialRow.tuning == tuning, TrialRow.number == number)
        .values(**values)
    )


@dataclass(frozen=True, slots=True)
class TrialReplica:
    """A trial's job as the store has it: its phase, message (why it waits, or how it
    ended), when it started, its latest progress report, and its first task's node and
    endpoint (``host:port``, once it runs)."""

    phase: str
    message: str
    started_at: float | None
    progress: dict[str, Any] | None
    node: str | None
    endpoint: str | None


def replica(session: Session, job: str) -> TrialReplica | None:
    """Trial job ``job`` (see ``TrialReplica``); None when it is gone."""
    found = session.execute(
        select(JobRow.id, JobRow.phase, JobRow.message, JobRow.started_at, JobRow.progress).where(
            JobRow.name == job
        )
    ).first()
    if found is None:
        return None
    task = session.execute(
        select(TaskRow.node, TaskRow.process)
        .where(TaskRow.job_id == found.id, TaskRow.index == 0)
        .order_by(TaskRow.id)
    ).first()
    process = None if task is None else task.process
    endpoint = process.get("endpoint") if isinstance(process, dict) else None
    return TrialReplica(
        phase=found.phase,
        message=found.message or "",
        started_at=found.started_at,
        progress=found.progress if isinstance(found.progress, dict) else None,
        node=None if task is None else task.node,
        endpoint=endpoint if isinstance(endpoint, str) and endpoint else None,
    )
