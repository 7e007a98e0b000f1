"""The ``Queue`` document: one node of the queue tree with its quotas.

A validated ``QueueDocument`` always converts to a domain ``Queue``; its guarantee
and deserved share never exceed its capability on any resource, and each cell type
appears once in its ``cells``. Its weight, priority, starvation threshold and quantities
are within the bounds of ``phalanx.spec.limits``.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.domain.resources import Resources
from phalanx.spec.common import (
    API_VERSION,
    JobDuration,
    Metadata,
    Name,
    Priority,
    SpecModel,
    UserName,
    located,
)
from phalanx.spec.limits import MAX_WEIGHT, MIN_WEIGHT
from phalanx.spec.quantity import ResourceMap, resources_of


class CellGuaranteeSpec(SpecModel):
    """One entry of ``cells``: ``count`` whole cells of ``type`` (a Cluster cell type)."""

    type: Name
    """A cell type of the Cluster (its cellTypes, or one derived from a GPU topology)."""
    count: Annotated[int, Field(ge=1, le=1_000_000)]
    """How many whole cells of that type the queue is guaranteed."""


class QueueSpec(SpecModel):
    """``spec`` of a Queue; fields mirror Volcano's Queue.

    ``cells`` makes the queue a virtual cluster (HiveD's, for the hived plugin): the
    whole cells it is guaranteed, by type, such as ``[{type: dgx1-v100-node, count:
    2}]`` for two 8-GPU NVLink nodes. Its jobs' GPUs go inside those cells, bound to
    physical cells as they are needed; work of others found there is evicted for them.
    Types are the Cluster's ``cellTypes`` or those derived from its GPU topologies
    (``<preset>-gpu``, ``-nvlink``, ``-pcie``, ``-socket``, ``-node``).
    """

    parent: Name = ROOT_QUEUE
    """The parent queue in the tree; omitted: a child of the root. Jobs go to leaf queues."""
    weight: Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)] = 1.0
    """The queue's share, relative to its siblings', of what is left after guarantees (its
    deserved share when deserved is omitted)."""
    guarantee: ResourceMap = Field(default_factory=dict)
    """Resources that are never lent away: reclaim gets them back for this queue's jobs
    whenever they wait."""
    deserved: ResourceMap | None = None
    """The fair share under contention; omitted: computed from weight. Above it, a queue's
    jobs run on borrowed capacity that reclaim may take back."""
    capability: ResourceMap | None = None
    """The hard cap on what the queue's jobs hold at once; omitted: no cap (within the
    parent's). A capability above the guarantee is how a queue borrows idle capacity."""
    reclaimable: bool = True
    """Whether other queues may reclaim what this queue holds above its deserved share."""
    overcommit: bool = False
    """Let the queue's work run beyond its quota on idle capacity; that excess is the first
    to be reclaimed."""
    priority: Priority = 0
    """Orders queues for allocation, reclaim and preemption (higher first)."""
    starvation_threshold: JobDuration | None = None
    """How long a job may wait before it gets a reservation (backfill keeps room for it); a
    job's own value overrides it."""
    submitters: list[UserName] | None = None
    """Who may submit here (the control plane's access list); omitted: every user. Admins
    always may."""
    cells: list[CellGuaranteeSpec] = Field(default_factory=list)
    """Whole cells the queue is guaranteed, making it a virtual cluster (the hived plugin)."""

    @model_validator(mode="after")
    def _cell_types_once(self) -> Self:
        seen: set[str] = set()
        for i, entry in enumerate(self.cells):
            if entry.type in seen:
                raise located(
                    f"cell type {entry.type!r} is listed twice",
                    "add the counts up in one entry",
                    at=("cells", i, "type"),
                )
            seen.add(entry.type)
        return self

    @model_validator(mode="after")
    def _within_capability(self) -> Self:
        if self.capability is None:
            return self
        cap = resources_of(self.capability)
        for field, amounts in (("guarantee", self.guarantee), ("deserved", self.deserved or {})):
            for name, amount in resources_of(amounts).items():
                if name in self.capability and amount > cap[name]:
                    raise located(
                        f"{amounts[name]} exceeds capability {self.capability[name]}",
                        f"lower {field}.{name} or raise capability.{name}",
                        at=(field, name),
                    )
        return self


class QueueDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Queue``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Queue"] = "Queue"
    """Always Queue."""
    metadata: Metadata
    """The queue's name (not root), labels and annotations."""
    spec: QueueSpec = QueueSpec()
    """The queue's place in the tree and its quotas."""

    @model_validator(mode="after")
    def _not_root_nor_own_parent(self) -> Self:
        name = self.metadata.name
        if name == ROOT_QUEUE:
            raise located(
                f"{ROOT_QUEUE!r} is the implicit root of the queue tree",
                "choose another name",
                at=("metadata", "name"),
            )
        if self.spec.parent == name:
            raise located(
                "a queue cannot be its own parent",
                f"name another queue or omit parent (default {ROOT_QUEUE!r})",
                at=("spec", "parent"),
            )
        return self

    def to_domain(self) -> Queue:
        """The domain ``Queue`` in canonical units."""
        spec = self.spec
        return Queue(
            name=self.metadata.name,
            parent=spec.parent,
            weight=spec.weight,
            guarantee=resources_of(spec.guarantee),
            deserved=_optional(spec.deserved),
            capability=_optional(spec.capability),
            reclaimable=spec.reclaimable,
            overcommit=spec.overcommit,
            priority=spec.priority,
            starvation_threshold=spec.starvation_threshold,
            cells=tuple(CellGuarantee(type=c.type, count=c.count) for c in spec.cells),
        )


def _optional(amounts: ResourceMap | None) -> Resources | None:
    return None if amounts is None else resources_of(amounts)
