"""``Client.wait``: block until a job reaches one of the phases asked for.

Guarantees: returns the job's view as soon as a read finds it in one of ``phases``;
raises ``WaitTimeout`` once ``timeout`` seconds have passed without that, and
``JobEnded`` as soon as the job ended in a phase that was not asked for (an ended job
never changes phase again, so waiting on would only wait out the timeout). Both name
the job, the phase it is in and the phases waited for. The clock and the sleep are
injectable, so tests drive a wait without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final

from phalanx.client._errors import ClientError
from phalanx.domain.job import JobPhase
from phalanx.wire.views import JobView

#: Phases a job never leaves.
ENDED: Final = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})
#: Seconds between two reads of the job while waiting.
WAIT_INTERVAL: Final = 0.5


class WaitError(ClientError):
    """A wait that did not see the job reach a phase asked for: ``job``, the ``phase``
    it was last seen in, and the ``wanted`` phases."""

    def __init__(self, detail: str, *, job: str, phase: str, wanted: tuple[str, ...], fix: str):
        super().__init__(detail, field="phase", fix=fix)
        self.job = job
        self.phase = phase
        self.wanted = wanted


class WaitTimeout(WaitError):
    """The timeout passed before the job reached a phase asked for."""


class JobEnded(WaitError):
    """The job ended in a phase that was not asked for: it will never reach one."""


def phases_of(phase: str | Iterable[str]) -> tuple[str, ...]:
    """The job phases named by ``phase`` (one name or several, any case), in order;
    ``ClientError`` (field ``phase``) for a name that is not a job phase."""
    names = [phase] if isinstance(phase, str) else list(phase)
    known = {p.value.lower(): p.value for p in JobPhase}
    found: list[str] = []
    for name in names:
        value = known.get(name.strip().lower())
        if value is None:
            raise ClientError(
                f"{name!r} is not a job phase",
                field="phase",
                fix=f"use one of {', '.join(JobPhase)}",
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
    deadline = clock() + timeout
    shown = " or ".join(wanted)
    while True:
        job = read()
        if job.phase in wanted:
            return job
        if job.phase in ENDED:
            raise JobEnded(
                f"job {name} ended {job.phase}"
                f"{f' ({job.reason})' if job.reason else ''}; it was waited for to be {shown}",
                job=name,
                phase=job.phase,
                wanted=wanted,
                fix=f"see why: phalanx describe job {name}",
            )
        left = deadline - clock()
        if left <= 0:
            raise WaitTimeout(
                f"timed out after {timeout:g}s waiting for job {name} to be {shown}; "
                f"it is {job.phase}{f' ({job.reason})' if job.reason else ''}",
                job=name,
                phase=job.phase,
                wanted=wanted,
                fix=f"wait longer, or see why it is {job.phase}: phalanx describe job {name}",
            )
        sleep(min(interval, left))
