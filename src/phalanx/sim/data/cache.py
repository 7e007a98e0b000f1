"""One simulated node's dataset cache and its link to the remote store: ``NodeCache``.

It keeps the rules of the real cache (``phalanx.data.cache.DatasetCache``) on the
simulation's clock instead of a disk:

- an entry is held whole or not at all: it counts (``held``) from the moment its fill
  ends; before, readers of it wait for that one fill (one fill of a key at a time);
- before a fill would take the entries held and being filled above the high watermark,
  the least recently used entries that are not pinned are evicted until they are at the
  low one (counting the fill); a pinned entry (a task on this node reads it) and one
  being filled are never evicted;
- a dataset that does not fit even then is read through without being cached (the real
  cache refuses it and its job fails; the simulator lets the task read it remotely and
  counts it, ``Read.cached`` False), and evicts nothing;
- fills take turns on the node's link at its full bandwidth, first come first served: a
  fill of ``size`` bytes ends ``size / bandwidth`` seconds after the link is free (all
  the fills under way end when they would sharing it, the first ones sooner).

Times are seconds of the simulation clock; a read at ``now`` first lands every fill
that ended by then.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from phalanx.domain.errors import EngineInvariantError
from phalanx.sim.data.model import CacheModel


@dataclass(frozen=True, slots=True, kw_only=True)
class Read:
    """What one read of a dataset on a node cost: when its data is there (``ready``),
    the bytes it put on the link (``cold_bytes``: 0 when warm or when it joined a fill
    under way), whether it was ``warm`` (held whole when asked) and whether the copy it
    reads is ``cached`` (pinned; False for a read through)."""

    ready: float
    cold_bytes: int
    warm: bool
    cached: bool


class NodeCache:
    """The datasets one node's cache holds, fills and evicts (see the module docstring)."""

    def __init__(self, model: CacheModel) -> None:
        self.model = model
        #: the complete entries' sizes by key, least recently used first
        self._entries: OrderedDict[str, int] = OrderedDict()
        #: the fills under way: key -> (size, when it ends)
        self._filling: dict[str, tuple[int, float]] = {}
        self._pins: dict[str, int] = {}
        self._link_free = 0.0  # when the link has carried every fill asked of it so far
        self.evictions = 0  # entries evicted so far

    def held(self) -> frozenset[str]:
        """The keys of the entries held whole (what ``Node.datasets`` says)."""
        return frozenset(self._entries)

    def lru(self) -> list[str]:
        """The keys of the entries held whole, least recently used first."""
        return list(self._entries)

    def next_landing(self) -> float | None:
        """When the next fill under way ends, or None."""
        return min((end for _, end in self._filling.values()), default=None)

    def read(self, key: str, size: int, now: float) -> Read:
        """A task starting at ``now`` reads dataset ``key`` of ``size`` bytes; pins it
        (``unpin`` when the task ends) unless it is read through."""
        self.land(now)
        if key in self._entries:
            self._entries.move_to_end(key)  # used now
            self._pin(key)
            return Read(ready=now, cold_bytes=0, warm=True, cached=True)
        if key in self._filling:
            self._pin(key)
            return Read(ready=self._filling[key][1], cold_bytes=0, warm=False, cached=True)
        cached = self._make_room(size)
        start = max(now, self._link_free)
        self._link_free = end = start + size / self.model.bandwidth
        if cached:
            self._filling[key] = (size, end)
            self._pin(key)
        return Read(ready=end, cold_bytes=size, warm=False, cached=cached)

    def unpin(self, key: str) -> None:
        """Release one pin of ``key`` (a task that read it ended)."""
        count = self._pins.get(key, 0)
        if count <= 0:
            raise EngineInvariantError(f"dataset {key!r} is not pinned on this node")
        if count == 1:
            del self._pins[key]
        else:
            self._pins[key] = count - 1

    def land(self, now: float) -> bool:
        """Every fill that ended by ``now`` becomes an entry (used when it ended, in the
        order they ended); whether any did."""
        done = sorted((end, key) for key, (_, end) in self._filling.items() if end <= now)
        for _, key in done:
            size, _ = self._filling.pop(key)
            self._entries[key] = size
        return bool(done)

    def _pin(self, key: str) -> None:
        self._pins[key] = self._pins.get(key, 0) + 1

    def _make_room(self, size: int) -> bool:
        """Evict what the watermarks say to before a fill of ``size`` bytes; False (and
        nothing evicted) when it does not fit even with every unpinned entry gone."""
        limits = self.model.limits
        reserved = sum(fill for fill, _ in self._filling.values())
        held = sum(self._entries.values()) + reserved + size
        if held <= limits.high * limits.quota:
            return True
        pinned = sum(n for key, n in self._entries.items() if key in self._pins)
        if pinned + reserved + size > limits.quota:
            return False
        for key in [k for k in self._entries if k not in self._pins]:
            if held <= limits.low * limits.quota:
                break
            held -= self._entries.pop(key)
            self.evictions += 1
        return True
