"""What each user of a limited queue holds in a session, and the limits it is held to.

``Holdings`` follows the session: the resources a user holds are the snapshot's
``user_allocated`` (kept by every task move); the jobs a user runs are those with a task
charged (allocated, pipelined, bound or running), kept here from the plugin's
``on_allocate``/``on_deallocate``; what enqueue admitted and has not started yet is
counted as about to run, so one session does not admit a user's whole backlog.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phalanx.domain.job import JobPhase
from phalanx.domain.queue import Queue, UserLimits
from phalanx.domain.resources import format_amount
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.wording import speak
from phalanx.engine.snapshot import CHARGED, EPSILON, JobInfo, Snapshot, Vector

UserKey = tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """One user's limits in one queue, with the document field each comes from."""

    running_jobs: int | None
    running_field: str
    resources: Vector | None  # engine units; inf where not limited
    resources_field: str

    @staticmethod
    def of(snapshot: Snapshot, queue: Queue, user: str) -> Limits | None:
        """``user``'s limits in ``queue``, or None when nothing limits them."""
        limits = queue.limits_of(user)
        if limits.running_jobs is None and limits.resources is None:
            return None
        own = dict(queue.user_limits).get(user, UserLimits())
        return Limits(
            running_jobs=limits.running_jobs,
            running_field=_field(own.running_jobs is not None, user, "runningJobs"),
            resources=None
            if limits.resources is None
            else snapshot.vector(limits.resources, missing=np.inf),
            resources_field=_field(own.resources is not None, user, "resources"),
        )


def _field(own: bool, user: str, name: str) -> str:
    return f"userLimits.{user}.{name}" if own else f"limits.{name}"


class Holdings:
    """One session's view of what the users of limited queues hold and run."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.snapshot = snapshot = session.snapshot
        self._limits: dict[UserKey, Limits | None] = {}
        #: names of each user's jobs with a charged task, kept through the session
        self.running: dict[UserKey, set[str]] = {}
        #: jobs admitted and not started (earlier sessions' and this one's): how many, and
        #: what their minimums still need
        self.admitted: dict[UserKey, tuple[int, Vector]] = {}
        self._seen_admissions = 0
        for job in snapshot.jobs.values():
            if not limited(job.queue.spec):
                continue
            if any(job.counts[status] for status in CHARGED):
                self.running.setdefault((job.queue.name, job.user), set()).add(job.name)
            elif job.phase is JobPhase.QUEUED:
                self._admit(job)

    def limits(self, job: JobInfo) -> Limits | None:
        """The limits of ``job``'s user in its queue (None: none)."""
        key = (job.queue.name, job.user)
        if key not in self._limits:
            self._limits[key] = Limits.of(self.snapshot, job.queue.spec, job.user)
        return self._limits[key]

    def follow(self, job: JobInfo) -> None:
        """Note whether ``job`` runs now (one of its tasks just moved)."""
        key = (job.queue.name, job.user)
        if any(job.counts[status] for status in CHARGED):
            self.running.setdefault(key, set()).add(job.name)
        elif key in self.running:
            self.running[key].discard(job.name)

    def held(self, job: JobInfo) -> Vector:
        """What ``job``'s user holds in its queue now."""
        found = self.snapshot.user_allocated.get((job.queue.name, job.user))
        return np.zeros(len(self.snapshot.dims)) if found is None else found

    def catch_up(self) -> None:
        """Count the jobs enqueue admitted since last asked as about to run."""
        admitted = self.session.admitted
        for name in admitted[self._seen_admissions :]:
            job = self.snapshot.jobs.get(name)
            if job is not None and limited(job.queue.spec):
                self._admit(job)
        self._seen_admissions = len(admitted)

    def _admit(self, job: JobInfo) -> None:
        key = (job.queue.name, job.user)
        count, need = self.admitted.get(key, (0, np.zeros(len(self.snapshot.dims))))
        self.admitted[key] = (count + 1, need + np.maximum(job.min_request() - job.allocated, 0))

    # -- refusals -----------------------------------------------------------------------

    def refuse_start(self, job: JobInfo, limits: Limits, *, extra: int = 0) -> str | None:
        """Why ``job`` may not start: its user runs ``runningJobs`` jobs already (with
        ``extra`` more about to run), or None."""
        if limits.running_jobs is None or job.name in self.running.get(_key(job), ()):
            return None
        runs = len(self.running.get(_key(job), ())) + extra
        if runs < limits.running_jobs:
            return None
        about = f" ({extra} of them admitted and about to start)" if extra else ""
        return (
            f"user {job.user} runs {runs} job{'' if runs == 1 else 's'} in queue "
            f"{job.queue.name}{about}, its limit ({limits.running_field} "
            f"{limits.running_jobs}); fix: wait for one of them to finish, or ask an admin "
            f"to raise {limits.running_field}"
        )

    def refuse_resources(
        self, job: JobInfo, limits: Limits, need: Vector, held: Vector
    ) -> str | None:
        """Why ``need`` more on top of ``held`` would take ``job``'s user past its resource
        limit, or None."""
        if limits.resources is None:
            return None
        cap = limits.resources
        over = held + need > cap + EPSILON
        if not over.any():
            return None
        snapshot = self.snapshot
        field = ", ".join(
            f"{limits.resources_field}.{snapshot.dims[d]} "
            f"{format_amount(snapshot.dims[d], float(cap[d] / snapshot.unit[d]))}"
            for d in np.flatnonzero(over)
        )
        minimum = job.min_request()
        if bool((minimum > cap + EPSILON).any()):
            tasks = job.min_available
            return (
                f"never fits: the job's minimum of {tasks} task{'' if tasks == 1 else 's'} "
                f"needs {speak(snapshot, minimum, dims=over)}, more than user {job.user} may "
                f"hold in queue {job.queue.name} ({field}); waiting will not help; fix: submit "
                f"a smaller job (fewer or smaller tasks, or a lower minAvailable) or ask an "
                f"admin to raise {limits.resources_field}"
            )
        return (
            f"user {job.user} holds {speak(snapshot, held, dims=over)} in queue "
            f"{job.queue.name}, its limit ({field}); the job needs "
            f"{speak(snapshot, need, dims=over)} more; fix: wait for the user's jobs there "
            f"to finish, or ask an admin to raise {limits.resources_field}"
        )


def _key(job: JobInfo) -> UserKey:
    return (job.queue.name, job.user)


def limited(queue: Queue) -> bool:
    """Whether ``queue`` limits some user's running jobs or resources."""
    return any(
        own.running_jobs is not None or own.resources is not None
        for own in (queue.limits, *(limits for _, limits in queue.user_limits))
    )
