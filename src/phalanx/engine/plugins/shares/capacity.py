"""capacity: explicit guarantee / deserved / capability over a queue tree.

A queue's deserved share is as written, or, when omitted, a weight-proportional part of
what its parent deserves beyond the siblings' explicit shares (capped by capability,
at least its guarantee). A resource a written share leaves out is not limited by it:
the queue deserves up to its parent's share of that resource. Queues may borrow idle
resources up to capability; borrowed resources are reclaimed down to deserved, never
below guarantee. A child never exceeds its parent: every ancestor's capability is
checked on each allocation.
"""

from __future__ import annotations

import numpy as np

from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.shares.base import QueueSharePlugin, water_fill
from phalanx.engine.snapshot import QueueInfo, Snapshot, Vector


class CapacityPlugin(QueueSharePlugin):
    """Elastic quotas: guarantee, deserved, capability; borrowing and reclaim."""

    name = "capacity"

    def compute_deserved(self, session: Session) -> None:
        """Deserved shares depend only on the queue specs and the root's capability, so they
        are computed once per root capability and reused by later sessions."""
        snapshot = session.snapshot
        root = snapshot.root
        memo = session.kept.get(_deserved_memo, Lifetime.FIXED)
        key = root.capability.tobytes()
        shares = memo.get(key)
        if shares is None:
            root.deserved = root.capability.copy()
            _fill_children(session, root)
            memo.clear()  # one root capability at a time: nodes rarely come and go
            shares = memo[key] = {q.name: q.deserved for q in snapshot.queues.values()}
        for name, deserved in shares.items():
            snapshot.queues[name].deserved = deserved


def _deserved_memo(snapshot: Snapshot) -> dict[bytes, dict[str, Vector]]:
    """Deserved shares per queue, keyed by the root capability they were computed for:
    fixed for the snapshot's life (queue specs do not change), one key at a time."""
    return {}


def _fill_children(session: Session, parent: QueueInfo) -> None:
    children = sorted(parent.children, key=lambda q: q.name)
    if not children:
        return
    explicit = [q for q in children if q.spec.deserved is not None]
    implicit = [q for q in children if q.spec.deserved is None]
    left = parent.deserved.copy()
    for queue in explicit:
        # A resource the spec leaves out (``deserved: {gpu: 8}`` says nothing of cpu) is
        # not a zero share: the queue deserves up to its parent's share of it.
        given = session.snapshot.vector(queue.spec.deserved, missing=np.nan)
        named = ~np.isnan(given)
        given = np.where(named, given, parent.deserved)
        queue.deserved = np.minimum(np.maximum(given, queue.guarantee), queue.capability)
        left = np.maximum(left - np.where(named, queue.deserved, 0.0), 0.0)
    if implicit:
        weights = np.array([q.spec.weight for q in implicit], dtype=np.float64)
        caps = np.array([q.capability for q in implicit])
        floors = np.array([q.guarantee for q in implicit])
        for queue, deserved in zip(implicit, water_fill(left, weights, caps, floors), strict=True):
            queue.deserved = deserved
    for queue in children:
        queue.deserved = np.minimum(
            queue.deserved, np.where(np.isfinite(parent.capability), parent.capability, np.inf)
        )
        _fill_children(session, queue)
