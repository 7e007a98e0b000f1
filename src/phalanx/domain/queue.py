"""Queues: nodes of a tree that carry guarantees, fair shares and caps, what each
of their users may hold (``UserLimits``) and use per period (``Budget``), and what
becomes of jobs that hold GPUs they do not use (``IdlePolicy``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.errors import InvalidInput
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


class IdleAction(StrEnum):
    """What happens to a job whose GPUs sat idle for a queue's whole window."""

    MARK = "mark"  # an event and a visible mark; the job runs on
    STOP = "stop"  # stopped for good (Failed, not retried); an elastic job above its minimum is shrunk to it


@dataclass(frozen=True, slots=True, kw_only=True)
class IdlePolicy:
    """A queue's ``idleGpus``: a job whose every GPU reading stays below ``threshold``
    (percent of utilisation, 0..100) for ``window`` seconds is idle, and ``action`` says
    what follows. ``queue`` names the queue whose policy this is (for messages): set by
    ``idle_policy_of``, empty on a policy built by hand. A threshold of 0 judges no job
    idle (no reading is below 0%): a child queue's way to opt out of its parent's.
    """

    threshold: float
    window: float
    action: IdleAction = IdleAction.MARK
    queue: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 100.0:
            raise InvalidInput(
                f"a threshold of {self.threshold!r}% is not a share of utilisation",
                field="idleGpus.threshold",
                fix="give a percent within 0..100, such as 5",
            )
        if not 0.0 < self.window < math.inf:
            raise InvalidInput(
                f"a window of {self.window!r} s is not a span of time",
                field="idleGpus.window",
                fix="give seconds > 0, such as 1800",
            )

    def said(self) -> str:
        """The test in words, durations as documents write them: ``below 5% utilisation
        for 30m``."""
        return f"below {self.threshold:g}% utilisation for {said_duration(self.window)}"


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
    ``idle_gpus`` is the queue's own idle policy; ``idle_policy_of`` gives the one that
    applies (its own, else its nearest ancestor's).
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
    idle_gpus: IdlePolicy | None = None

    def limits_of(self, user: str) -> UserLimits:
        """The limits that apply to ``user`` in this queue."""
        for name, own in self.user_limits:
            if name == user:
                return self.limits.replaced_by(own)
        return self.limits


def idle_policy_of(name: str, queues: Mapping[str, Queue]) -> IdlePolicy | None:
    """The idle policy that applies to jobs of queue ``name``: the queue's own
    ``idle_gpus``, else its nearest ancestor's (as Kueue and Volcano users expect of a
    setting on a parent), with ``queue`` naming the queue that set it. None when no
    queue on the way to the root sets one, or ``name`` is unknown. A cycle of parents
    (refused elsewhere) ends the walk."""
    seen: set[str] = set()
    current = queues.get(name)
    while current is not None and current.name not in seen:
        if current.idle_gpus is not None:
            return replace(current.idle_gpus, queue=current.name)
        seen.add(current.name)
        current = queues.get(current.parent)
    return None


def said_duration(seconds: float) -> str:
    """``seconds`` as a document writes a duration, to the second: ``30m``, ``1h30m``,
    ``2d``, ``45s`` (what ``parse_duration`` reads back, rounded up to a whole second)."""
    left = max(math.ceil(seconds), 1)
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts)
