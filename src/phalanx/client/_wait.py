"""``Client.wait`` and ``Client.wait_run``: block until a job or a run reaches one of
the phases asked for.

Guarantees: returns the object's view as soon as a read finds it in one of ``phases``;
raises ``WaitTimeout`` once ``timeout`` seconds have passed without that, and
``JobEnded`` (``RunEnded``) as soon as the job (run) ended in a phase that was not asked
for (an ended one never changes phase again, so waiting on would only wait out the
timeout). Each names the object, the phase it is in and the phases waited for; a run's
also names its failed steps and why they failed. The clock and the sleep are
injectable, so tests drive a wait without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Final, Literal, TypeVar

from phalanx.client._errors import ClientError
from phalanx.domain.job import JobPhase
from phalanx.domain.run import Phase, RunPhase
from phalanx.wire.views import JobView, RunView

#: Phases a job never leaves.
ENDED: Final = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})
#: Phases a run never leaves.
RUN_ENDED: Final = frozenset({RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.CANCELLED})
#: Seconds between two reads of the job while waiting.
WAIT_INTERVAL: Final = 0.5

Kind = Literal["job", "run"]
V = TypeVar("V", JobView, RunView)


class WaitError(ClientError):
    """A wait that did not see a job (or run) reach a phase asked for: its ``kind``
    (``job`` or ``run``), ``name``, the ``phase`` it was last seen in, and the ``wanted``
    phases."""

    def __init__(
        self,
        detail: str,
        *,
        name: str,
        phase: str,
        wanted: tuple[str, ...],
        fix: str,
        kind: Kind = "job",
    ):
        super().__init__(detail, field="phase", fix=fix)
        self.kind: Kind = kind
        self.name = name
        self.phase = phase
        self.wanted = wanted

    @property
    def job(self) -> str:
        """The name waited on (a job's, for ``Client.wait``)."""
        return self.name


class WaitTimeout(WaitError):
    """The timeout passed before the job (run) reached a phase asked for."""


class JobEnded(WaitError):
    """The job ended in a phase that was not asked for: it will never reach one."""


class RunEnded(WaitError):
    """The run ended in a phase that was not asked for: it will never reach one.
    ``failed`` names its failed steps (units), each with why."""

    def __init__(
        self,
        detail: str,
        *,
        name: str,
        phase: str,
        wanted: tuple[str, ...],
        fix: str,
        failed: tuple[tuple[str, str], ...] = (),
    ):
        super().__init__(detail, kind="run", name=name, phase=phase, wanted=wanted, fix=fix)
        self.failed = failed


def phases_of(phase: str | Iterable[str], kind: Kind = "job") -> tuple[str, ...]:
    """The job (or run) phases named by ``phase`` (one name or several, any case), in
    order; ``ClientError`` (field ``phase``) for a name that is not such a phase."""
    names = [phase] if isinstance(phase, str) else list(phase)
    every: type[StrEnum] = JobPhase if kind == "job" else RunPhase
    known = {p.value.lower(): p.value for p in every}
    found: list[str] = []
    for name in names:
        value = known.get(name.strip().lower())
        if value is None:
            raise ClientError(
                f"{name!r} is not a {kind} phase",
                field="phase",
                fix=f"use one of {', '.join(every)}",
            )
        if value not in found:
            found.append(value)
    if not found:
        raise ClientError("no phase to wait for", field="phase", fix="name at least one phase")
    return tuple(found)


def wait_for_phase(
    read: Callable[[], JobView],
    name: str,
    wanted: tuple[str, ...],
    timeout: float,
    *,
    interval: float = WAIT_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JobView:
    """``read()`` until the job is in one of ``wanted``; see the module's guarantees."""
    return _wait(read, "job", name, wanted, timeout, interval=interval, clock=clock, sleep=sleep)


def wait_for_run(
    read: Callable[[], RunView],
    run_id: str,
    wanted: tuple[str, ...],
    timeout: float,
    *,
    interval: float = WAIT_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RunView:
    """``read()`` until the run is in one of ``wanted``; see the module's guarantees."""
    return _wait(read, "run", run_id, wanted, timeout, interval=interval, clock=clock, sleep=sleep)


def _wait(
    read: Callable[[], V],
    kind: Kind,
    name: str,
    wanted: tuple[str, ...],
    timeout: float,
    *,
    interval: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> V:
    deadline = clock() + timeout
    shown = " or ".join(wanted)
    while True:
        view = read()
        if view.phase in wanted:
            return view
        if view.phase in (ENDED if kind == "job" else RUN_ENDED):
            raise _ended(view, name, wanted)
        left = deadline - clock()
        if left <= 0:
            raise WaitTimeout(
                f"timed out after {timeout:g}s waiting for {kind} {name} to be {shown}; "
                f"it is {view.phase}{_why(view)}",
                kind=kind,
                name=name,
                phase=view.phase,
                wanted=wanted,
                fix=f"wait longer, or see why it is {view.phase}: phalanx describe {kind} {name}",
            )
        sleep(min(interval, left))


def _ended(view: JobView | RunView, name: str, wanted: tuple[str, ...]) -> WaitError:
    """The error for ``view``, ended in a phase not in ``wanted``."""
    shown = " or ".join(wanted)
    if isinstance(view, JobView):
        return JobEnded(
            f"job {name} ended {view.phase}{_why(view)}; it was waited for to be {shown}",
            name=name,
            phase=view.phase,
            wanted=wanted,
            fix=f"see why: phalanx describe job {name}",
        )
    failed = failed_steps(view)
    said = "; ".join(f"step {unit} failed{f' ({why})' if why else ''}" for unit, why in failed)
    said = said or view.message
    return RunEnded(
        f"run {name} ended {view.phase}{f': {said}' if said else ''}; "
        f"it was waited for to be {shown}",
        failed=failed,
        name=name,
        phase=view.phase,
        wanted=wanted,
        fix=f"see its steps: phalanx describe run {name}",
    )


def failed_steps(run: RunView) -> tuple[tuple[str, str], ...]:
    """The units of ``run`` that failed, in the run's order, each with its reason."""
    return tuple((step.unit, step.reason) for step in run.steps if step.phase == Phase.FAILED)


def _why(view: JobView | RunView) -> str:
    reason = view.reason if isinstance(view, JobView) else ""
    return f" ({reason})" if reason else ""
