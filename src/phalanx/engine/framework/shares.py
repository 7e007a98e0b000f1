"""Queue shares: what a queue-share plugin gives each queue for one session.

A session has at most one ``QueueShares`` (``Session.shares``, set by the plugin through
``Session.publish_shares``); actions read it there. None means no plugin gave queues a
deserved share: no queue has one to be measured against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from phalanx.engine.snapshot import QueueInfo, Vector


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueShares:
    """Every queue's deserved share, guarantee and capability (by queue name, vectors over
    the snapshot's dimensions) as ``plugin`` computed them when the session opened.

    Guarantees: a value, not a view: its vectors are copies, read-only, so later changes
    to the queues do not reach it; every queue of the snapshot has an entry in each map.
    """

    plugin: str
    deserved: Mapping[str, Vector]
    guarantee: Mapping[str, Vector]
    capability: Mapping[str, Vector]

    @classmethod
    def of(cls, plugin: str, queues: Iterable[QueueInfo]) -> QueueShares:
        """The shares ``queues`` hold now (their ``deserved`` as ``plugin`` set it)."""
        deserved, guarantee, capability = {}, {}, {}
        for queue in queues:
            deserved[queue.name] = _frozen(queue.deserved)
            guarantee[queue.name] = _frozen(queue.guarantee)
            capability[queue.name] = _frozen(queue.capability)
        return cls(
            plugin=plugin,
            deserved=MappingProxyType(deserved),
            guarantee=MappingProxyType(guarantee),
            capability=MappingProxyType(capability),
        )


def _frozen(vector: Vector) -> Vector:
    copy = vector.copy()
    copy.setflags(write=False)
    return copy
