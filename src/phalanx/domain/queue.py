"""Queues: nodes of a tree that carry guarantees, fair shares and caps."""

from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.resources import Resources

ROOT_QUEUE = "root"


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    """A queue of the tree. Jobs are submitted to leaf queues.

    ``guarantee`` is never lent away; ``deserved`` is the fair share under contention
    (computed from ``weight`` when None); ``capability`` is the hard cap (None means
    unlimited, within the parent's cap). Work of an ``overcommit`` queue may run
    beyond its quota, and that excess is the first to be reclaimed. ``cells`` makes the
    queue a virtual cluster: whole cells it is guaranteed (the hived plugin's).
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
