"""Queue shares: what a queue-share plugin gives each queue for one session.

A session has at most one ``QueueShares`` (``Session.shares``, set by the plugin through
``Session.publish_shares``); actions read it there. None means no plugin gave queues a
deserved share: no queue has one to be measured against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from phalanx.engine.snapshot import QueueInfo, Vector


class QueueShares:
    """Every queue's deserved share, guarantee and capability (by queue name, vectors over
    the snapshot's dimensions) as ``plugin`` computed them when the session opened.

    Guarantees: the maps are built when first read (most sessions never read them), from
    the queues as the plugin left them: a queue's shares change only when a session
    opens, so that is what they held at open; every queue of the snapshot has an entry in
    each map, and the vectors are read-only copies.
    """

    __slots__ = ("_maps", "_queues", "plugin")

    def __init__(self, plugin: str, queues: Iterable[QueueInfo]) -> None:
        self.plugin = plugin
        self._queues = tuple(queues)
        self._maps: tuple[Mapping[str, Vector], ...] | None = None

    @classmethod
    def of(cls, plugin: str, queues: Iterable[QueueInfo]) -> QueueShares:
        """The shares ``queues`` hold (their ``deserved`` as ``plugin`` set it)."""
        return cls(plugin, queues)

    @property
    def deserved(self) -> Mapping[str, Vector]:
        """Each queue's deserved share."""
        return self._built()[0]

    @property
    def guarantee(self) -> Mapping[str, Vector]:
        """Each queue's guarantee."""
        return self._built()[1]

    @property
    def capability(self) -> Mapping[str, Vector]:
        """Each queue's capability (inf where it has none)."""
        return self._built()[2]

    def _built(self) -> tuple[Mapping[str, Vector], ...]:
        if self._maps is None:
            self._maps = tuple(
                MappingProxyType({q.name: _frozen(getattr(q, part)) for q in self._queues})
                for part in ("deserved", "guarantee", "capability")
            )
        return self._maps


def _frozen(vector: Vector) -> Vector:
    copy = vector.copy()
    copy.setflags(write=False)
    return copy
