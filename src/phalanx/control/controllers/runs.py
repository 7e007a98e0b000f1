"""A run's record as the workflow controller stores it (``RunRow.state``, JSON), and the
planner's ``RunState`` read from it.

The record holds, per unit (``train`` or ``train[3]``): its phase, its attempt (1-based)
and that attempt's job name (``phalanx.workflow.job_name``: deterministic, so a
restarted controller finds the job it submitted), the time the next attempt is due
when it waits for a retry, its outputs once Succeeded, why it ended, and its job's
start and end times; and per fanned-out step, its item count. ``resumed_record`` makes
the first record of a run that resumes another. The rules of a unit's end are here too
(``end_unit``, ``retry_or_fail``) and a run's summary (``run_summary``). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from phalanx.control.store.models import RunRow
from phalanx.spec.pipeline import Graph
from phalanx.spec.pipeline.parts import FailureCause, RetrySpec
from phalanx.spec.pipeline.templates import Value
from phalanx.workflow import Phase, RunPhase, RunState, Unit, check_transition, resume_state

_UNIT: Final = re.compile(r"(?P<step>[^\[\]]+)(?:\[(?P<index>\d+)\])?")


def unit_of(key: str) -> Unit:
    """``train`` or ``train[3]`` as a ``Unit``; raises ``ValueError`` for anything else."""
    found = _UNIT.fullmatch(key)
    if found is None:
        raise ValueError(f"{key!r} is not a unit")
    index = found["index"]
    return Unit(found["step"], None if index is None else int(index))


@dataclass(slots=True, kw_only=True)
class UnitRecord:
    """What the controller knows of one unit."""

    phase: Phase = Phase.PENDING
    attempt: int = 0  # 0: never started
    job: str = ""  # the current attempt's job
    retry_at: float | None = None  # the next attempt is submitted from then on
    outputs: dict[str, Value] = field(default_factory=dict)
    reason: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    cache_key: str = ""  # its step cache key, when its step is cached

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data (defaults left out)."""
        data: dict[str, Any] = {"phase": self.phase.value}
        for name in ("attempt", "job", "retry_at", "outputs", "reason", "cache_key"):
            value = getattr(self, name)
            if value:
                data[name] = value
        for name in ("started_at", "finished_at"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnitRecord:
        """The record of ``to_json``'s data."""
        return cls(
            phase=Phase(data["phase"]),
            attempt=int(data.get("attempt", 0)),
            job=str(data.get("job", "")),
            retry_at=data.get("retry_at"),
            outputs=dict(data.get("outputs", {})),
            reason=str(data.get("reason", "")),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            cache_key=str(data.get("cache_key", "")),
        )


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """Every unit's record and every fanned-out step's item count."""

    units: dict[Unit, UnitRecord] = field(default_factory=dict)
    expanded: dict[str, int] = field(default_factory=dict)

    def unit(self, unit: Unit) -> UnitRecord:
        """The record of ``unit``, made Pending when it has none."""
        return self.units.setdefault(unit, UnitRecord())

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data."""
        return {
            "units": {str(unit): record.to_json() for unit, record in sorted(self.units.items())},
            "expanded": dict(self.expanded),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record of ``to_json``'s data (an empty mapping: a run not yet planned)."""
        return cls(
            units={
                unit_of(key): UnitRecord.from_json(value)
                for key, value in dict(data.get("units", {})).items()
            },
            expanded={str(k): int(v) for k, v in dict(data.get("expanded", {})).items()},
        )

    def state(self, *, run_id: str, params: Mapping[str, Value], stopping: bool) -> RunState:
        """The planner's view of the run."""
        phases = {u: r.phase for u, r in self.units.items() if r.phase is not Phase.PENDING}
        outputs = {u: r.outputs for u, r in self.units.items() if r.outputs}
        return RunState(
            params=params,
            phases=phases,
            outputs=outputs,
            expanded=dict(self.expanded),
            stopping=stopping,
            run_id=run_id,
        )


def resumed_record(
    graph: Graph,
    previous: RunRecord,
    *,
    previous_id: str,
    previous_params: Mapping[str, Value],
    params: Mapping[str, Value],
    run_id: str,
    from_step: str | None = None,
) -> RunRecord:
    """The first record of run ``run_id`` resuming run ``previous_id`` (``previous``):
    every unit ``phalanx.workflow.resume_state`` reuses is Cached with the old unit's
    outputs (artifact URLs still in the old run's workspace, so a consumer reads the very
    artifact the old run made), its job and times, and a reason naming the old run; the
    rest is Pending. Raises ``InvalidInput`` for a ``from_step`` that is not a step."""
    old = previous.state(run_id=previous_id, params=previous_params, stopping=False)
    state, reused = resume_state(graph, old, params=params, run_id=run_id, from_step=from_step)
    record = RunRecord(expanded=dict(state.expanded))
    for unit in reused:
        was = previous.units[unit]
        record.units[unit] = UnitRecord(
            phase=Phase.CACHED,
            attempt=was.attempt,
            job=was.job,
            outputs=dict(state.outputs.get(unit, {})),
            reason=f"reused from run {previous_id}",
            started_at=was.started_at,
            finished_at=was.finished_at,
        )
    return record


def new_run(
    run_id: str,
    *,
    pipeline: str,
    document: dict[str, Any],
    user: str,
    params: Mapping[str, Any],
    created_at: float,
    cache: str = "use",
    scheduled_at: float | None = None,
    resumes: tuple[str, RunRecord] | None = None,
    parent: str | None = None,
) -> RunRow:
    """A Pending run ``run_id`` of pipeline ``pipeline`` (its ``document`` as stored),
    for ``user`` (who owns its jobs and artifacts) with resolved ``params``; the
    workflow controller plans it on its next tick. A run that ``resumes`` another (its
    id, and the first record ``resumed_record`` made) starts from that record; a child
    run names its ``parent``."""
    return RunRow(
        id=run_id,
        pipeline=pipeline,
        user=user,
        document=document,
        params=dict(params),
        phase=RunPhase.PENDING.value,
        message="",
        state={} if resumes is None else resumes[1].to_json(),
        stop_requested=False,
        created_at=created_at,
        cache_mode=cache,
        scheduled_at=scheduled_at,
        resumed_from=None if resumes is None else resumes[0],
        parent=parent,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptEnd:
    """How an attempt of a unit ended unsuccessfully: its ``retry.on`` cause, the words
    for people, when (None: not known; then the time it was seen), and the command that
    shows what the attempt itself said (its job's log, its child run's steps)."""

    cause: FailureCause
    why: str
    at: float | None
    shown_by: str


def end_unit(unit: Unit, record: UnitRecord, phase: Phase, reason: str, when: float) -> None:
    """End ``unit`` in ``phase`` with ``reason`` (its job's end ``when``, if it ran one).
    Raises ``IllegalTransition`` for a phase the unit cannot go to from its own."""
    check_transition(unit, record.phase, phase)
    record.phase, record.reason, record.retry_at = phase, reason, None
    if record.job:
        record.finished_at = when


def retry_or_fail(
    retry: RetrySpec,
    unit: Unit,
    record: UnitRecord,
    ended: AttemptEnd,
    *,
    stopping: bool,
    now: float,
) -> None:
    """After an attempt of ``unit`` ``ended``: its next attempt after the step's
    ``retry`` backoff, or (when the policy has none left, or the run is ``stopping``)
    the unit Failed with the reason, saying how to have it retried."""
    delay = None if stopping else retry.delay(record.attempt, ended.cause)
    if delay is not None:
        record.retry_at, record.reason = now + delay, ended.why
        return
    why = ended.why
    if not stopping and record.attempt > 1:
        why += f" (attempt {record.attempt} of {retry.max_attempts})"
    if not stopping:
        why += f"; fix: {_fix(retry, ended)}"
    end_unit(unit, record, Phase.FAILED, why, ended.at or now)


def _fix(retry: RetrySpec, ended: AttemptEnd) -> str:
    """What can help after the last attempt. For a cause from outside the step
    (``preempted``, ``nodeLost``) that ``retry.on`` leaves out: retrying it. For the
    step's own failure (``failed``: its exit, its timeout), which the same command on the
    same inputs would most likely repeat (a directory it cannot write, a bug): reading
    what it said, not retrying it."""
    if ended.cause != "failed" and ended.cause not in retry.on:
        return f"add {ended.cause} to the step's retry.on to retry it"
    return f"see what it said: {ended.shown_by}"


def run_summary(record: RunRecord, phase: RunPhase) -> str:
    """Why a run that ended in ``phase`` ended so: its first failed step and the reason,
    or who stopped it; empty for a success."""
    if phase is RunPhase.CANCELLED:
        return "stopped by request"
    if phase is not RunPhase.FAILED:
        return ""
    for unit, found in sorted(record.units.items()):
        if found.phase is Phase.FAILED:
            return f"step {unit} failed: {found.reason}"[:2000]
    return "a step was cancelled"
