"""The queue tree as a snapshot holds it: each queue with what its jobs are charged.

Built once with its snapshot (the tree is fixed for the snapshot's life: a driver that
edits queues builds a new ``ClusterState``); ``allocated`` and ``evictable`` follow
every task move, ``inqueue`` is cleared by each session that opens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from phalanx.domain.errors import InvalidInput
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.engine.snapshot.units import Vector

if TYPE_CHECKING:
    from phalanx.engine.snapshot.tasks import JobInfo, TaskInfo


class QueueInfo:
    """One queue of the tree with its aggregate state; ``ancestors`` runs self -> root."""

    __slots__ = (
        "allocated",
        "ancestors",
        "capability",
        "children",
        "deserved",
        "evictable",
        "guarantee",
        "inqueue",
        "jobs",
        "name",
        "parent",
        "spec",
        "uncapped",
    )

    def __init__(self, spec: Queue, ndims: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.parent: QueueInfo | None = None
        self.children: list[QueueInfo] = []
        self.ancestors: tuple[QueueInfo, ...] = ()
        self.jobs: dict[JobInfo, None] = {}  # an ordered set: arrival order, O(1) removal
        #: the bound and running tasks of its preemptible jobs (a leaf's), kept by ``move``:
        #: what eviction considers, without listing every task of the queue
        self.evictable: dict[TaskInfo, None] = {}
        self.allocated: Vector = np.zeros(ndims)
        self.inqueue: Vector = np.zeros(ndims)
        self.guarantee: Vector = np.zeros(ndims)
        self.deserved: Vector = np.zeros(ndims)  # set by a quota plugin
        self.capability: Vector = np.full(ndims, np.inf)
        self.uncapped = spec.capability is None  # no finite capability of its own

    @property
    def is_leaf(self) -> bool:
        """True when no queue names this one as its parent."""
        return not self.children

    def __repr__(self) -> str:
        return f"QueueInfo({self.name})"


def queue_tree(
    queues: Sequence[Queue],
    ndims: int,
    vector: Callable[..., Vector],
) -> dict[str, QueueInfo]:
    """Every queue by name, the root (``ROOT_QUEUE``) first and the others by name, linked
    to parent, children and ancestors; ``vector(resources, missing=...)`` makes rows.

    ``InvalidInput`` for a queue defined twice, a parent that does not exist, or a cycle.
    """
    root = QueueInfo(Queue(name=ROOT_QUEUE, parent=""), ndims)
    tree: dict[str, QueueInfo] = {ROOT_QUEUE: root}
    for spec in sorted(queues, key=lambda q: q.name):
        if spec.name in tree:
            raise InvalidInput(
                f"queue {spec.name!r} is defined twice",
                field="queues",
                fix="give every queue a unique name",
            )
        info = QueueInfo(spec, ndims)
        info.guarantee = vector(spec.guarantee)
        if spec.capability is not None:
            info.capability = vector(spec.capability, missing=np.inf)
        tree[spec.name] = info
    for info in tree.values():
        if info is root:
            continue
        parent = tree.get(info.spec.parent)
        if parent is None:
            raise InvalidInput(
                f"queue {info.name!r} names parent {info.spec.parent!r}, which does not exist",
                field=f"queues.{info.name}.parent",
                fix="create the parent queue or leave parent empty for the root",
            )
        info.parent = parent
        parent.children.append(info)
    for info in tree.values():
        chain: list[QueueInfo] = []
        cursor: QueueInfo | None = info
        while cursor is not None:
            if cursor in chain:
                raise InvalidInput(
                    f"queue {info.name!r} is its own ancestor",
                    field=f"queues.{info.name}.parent",
                    fix="make the queue tree acyclic",
                )
            chain.append(cursor)
            cursor = cursor.parent
        info.ancestors = tuple(chain)
    return tree
