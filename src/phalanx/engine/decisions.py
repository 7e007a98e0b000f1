"""Decisions: what one session concluded. Cannot-place is data with a reason, not an error."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from phalanx.domain.resources import Resources


class ReasonCode(StrEnum):
    """Why a job was left pending; each code maps to something a person can change."""

    INVALID = "Invalid"  # the job can never run as written (gang larger than its tasks)
    QUEUE_LIMIT = "QueueLimit"  # its queue (or an ancestor) is at capability or quota
    NOT_ADMITTED = "NotAdmitted"  # enqueue did not admit it yet (queue or cluster full)
    INSUFFICIENT = "InsufficientResources"  # no node has room now
    NO_MATCHING_NODE = "NoMatchingNode"  # selectors, taints or limits exclude every node
    GANG = "GangUnsatisfied"  # fewer than minAvailable tasks could be placed together
    RESERVED = "Reserved"  # it holds a reservation and waits for it to start
    BLOCKED_BY_RESERVATION = "BlockedByReservation"  # room exists, but is held for a starving job
    WAITING_FOR_RELEASE = "WaitingForRelease"  # pipelined onto resources being released
    CELLS_BUSY = "CellsBusy"  # its virtual cluster's guaranteed cells hold other work (hived)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reason:
    """A sentence for people plus the structured facts behind it."""

    code: ReasonCode
    message: str
    resource: str | None = None
    queue: str | None = None
    node: str | None = None  # the best candidate node
    shortfall: Resources = field(default_factory=Resources)  # what the best candidate lacks


@dataclass(frozen=True, slots=True, kw_only=True)
class Admit:
    """Enqueue admitted a job: Pending -> Queued."""

    job: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuShare:
    """Isolation for a task holding a share of one card, for executors to enforce: the MPS
    active-thread percentage and a limit on the card's memory."""

    compute_percent: int  # 1..100 of the card's compute; 100 for a memory-only share
    memory_limit: float  # bytes of the card's memory the task may use; 0 when unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class Bind:
    """Start ``task`` of ``job`` on ``node`` with GPU cards ``gpus`` (a share of the one card
    when ``share`` is set) and, for a task of a multi-node job, the node's NICs ``nics``."""

    job: str
    task: str
    role: str
    index: int
    node: str
    gpus: tuple[int, ...] = ()
    share: GpuShare | None = None
    nics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Pipeline:
    """``task`` will go to ``node`` once resources being released there are free."""

    job: str
    task: str
    node: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Evict:
    """Stop ``task`` of ``job`` on ``node``; ``by`` is the job that needs the room."""

    job: str
    task: str
    node: str
    action: str  # reclaim | preempt
    by: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Resize:
    """Set the size of ``job``'s elastic ``role`` to ``size`` replicas, and why.

    ``leaving`` names running replicas of the role that stop and leave the job (the job
    is re-placed as it is resized): the role then gets new replicas up to ``size``."""

    job: str
    role: str
    size: int
    reason: str
    leaving: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """Resources held on ``nodes`` for a starving ``job`` that should start by ``start_time``."""

    job: str
    nodes: tuple[str, ...]
    start_time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Unschedulable:
    """A job left pending, and why; ``position`` is its 1-based place in its leaf queue's
    line, counted among the jobs left pending there in the order allocate serves jobs
    (queue's own order, user rank, job order, then arrival): 1 is served first. None for a
    job refused as it stands (``Invalid``): it is not in any line."""

    job: str
    reason: Reason
    position: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decisions:
    """Everything one session decided, in a deterministic order."""

    admitted: tuple[Admit, ...] = ()
    binds: tuple[Bind, ...] = ()
    pipelined: tuple[Pipeline, ...] = ()
    evictions: tuple[Evict, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    resized: tuple[Resize, ...] = ()
    unschedulable: tuple[Unschedulable, ...] = ()
    explanations: tuple[str, ...] = field(default=())

    def reason_for(self, job: str) -> Reason | None:
        """The reason ``job`` was left pending, if it was."""
        for item in self.unschedulable:
            if item.job == job:
                return item.reason
        return None


class _OfAJob(Protocol):
    @property
    def job(self) -> str: ...


_Item = TypeVar("_Item", bound=_OfAJob)


def by_job(items: Iterable[_Item]) -> dict[str, list[_Item]]:
    """``items`` grouped by their job, jobs in first-seen order, items in their order."""
    grouped: dict[str, list[_Item]] = {}
    for item in items:
        grouped.setdefault(item.job, []).append(item)
    return grouped
