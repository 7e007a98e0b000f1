"""Queues: nodes of a tree that carry guarantees, fair shares and caps, and what each
of their users may hold (``UserLimits``) and use per period (``Budget``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.resources import Resources

ROOT_QUEUE = "root"


class WhenSpent(StrEnum):
    """What happens to a user's new jobs once a budget of their queue is spent."""

    HOLD = "hold"  # they wait, with the reason, until the next period
    LOWER_PRIORITY = "lowerPriority"  # they go after every job within budget


@dataclass(frozen=True, slots=True, kw_only=True)
class UserLimits:
    """What one user of a queue may have at once (Slurm's MaxJobsPerUser,
    MaxSubmitJobsPerUser, MaxTRESPerUser); None: no limit of that kind.

    ``running_jobs``: jobs holding nodes; ``waiting_jobs``: jobs submitted and not yet
    running (more are refused at submit by the control plane); ``resources``: held at
    once, canonical units, only the names given are limited.
    """

    running_jobs: int | None = None
    waiting_jobs: int | None = None
    resources: Resources | None = None

    def replaced_by(self, other: UserLimits) -> UserLimits:
        """These limits with every field ``other`` sets taken from it (a resource map is
        one field: it replaces the whole map)."""
        return UserLimits(
            running_jobs=self.running_jobs if other.running_jobs is None else other.running_jobs,
            waiting_jobs=self.waiting_jobs if other.waiting_jobs is None else other.waiting_jobs,
            resources=self.resources if other.resources is None else other.resources,
        )

    @property
    def empty(self) -> bool:
        """True when nothing is limited."""
        return self.running_jobs is None and self.waiting_jobs is None and self.resources is None


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Resource-hours a queue's users may use per ``period`` (seconds; periods are aligned
    to t=0, so a 1-day period restarts at UTC midnight): Slurm's GrpTRESMins.

    ``per_user`` and ``queue`` are in canonical units times hours (``gpu: 100`` is 100
    GPU-hours, ``cpu: 100000`` is 100 core-hours); ``queue`` bounds the users together.
    None: no budget of that kind. ``when_spent`` says what happens to jobs then.
    """

    period: float
    per_user: Resources | None = None
    queue: Resources | None = None
    when_spent: WhenSpent = WhenSpent.HOLD


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    """A queue of the tree. Jobs are submitted to leaf queues.

    ``guarantee`` is never lent away; ``deserved`` is the fair share under contention
    (computed from ``weight`` when None); ``capability`` is the hard cap (None means
    unlimited, within the parent's cap). Work of an ``overcommit`` queue may run
    beyond its quota, and that excess is the first to be reclaimed. ``cells`` makes the
    queue a virtual cluster: whole cells it is guaranteed (the hived plugin's).
    ``limits``, ``user_limits`` and ``budget`` bound each user of the queue (the
    userlimits plugin's; ``waiting_jobs`` is the control plane's, at submit).
    """

    name: str
    parent: str = ROOT_QUEUE
    weight: float = 1.0
    guarantee: Resources = field(default_factory=Resources)
    deserved: Resources | None = None
    capability: Resources | None = None
    reclaimable: bool = True
    overcommit: bool = False
    priority: int = 0
    starvation_threshold: float | None = None  # seconds a job may wait before it gets a reservation
    cells: tuple[CellGuarantee, ...] = ()
    #: each user's limits, unless ``user_limits`` replaces some of them for that user
    limits: UserLimits = field(default_factory=UserLimits)
    #: (user, limits) pairs, by user: fields set there replace those of ``limits``
    user_limits: tuple[tuple[str, UserLimits], ...] = ()
    budget: Budget | None = None

    def limits_of(self, user: str) -> UserLimits:
        """The limits that apply to ``user`` in this queue."""
        for name, own in self.user_limits:
            if name == user:
                return self.limits.replaced_by(own)
        return self.limits
