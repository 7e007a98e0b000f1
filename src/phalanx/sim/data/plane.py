"""Every simulated node's dataset cache, and what each task reads: ``DataPlane``.

The simulated cluster asks it, as a task starts on a node, when that task's datasets
are all there (``start``), and tells it when the task ends (``stop``); the driver asks
it which nodes' caches changed (``changes``), to show the engine (``Node.datasets``).

Guarantees:

- a task's datasets are read on its own node (``NodeCache``): a task of a gang on
  another node fills that node; a task's data is ready when the last of its reads is;
- a task pins what it reads on its node from its start to ``stop``;
- a fill lands (its node holds the dataset whole) at the time it ends, whoever asks
  first after it (``land``, or any read on that node);
- ``changes`` lists each node whose held datasets changed since the last call, by name,
  with what it holds now;
- every start that reads a dataset is recorded in ``stats``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from phalanx.domain.errors import EngineInvariantError
from phalanx.sim.data.cache import NodeCache
from phalanx.sim.data.model import CacheModel
from phalanx.sim.data.stats import DataStats

#: A task, as the simulated cluster names it: (job, task).
TaskId = tuple[str, str]


class DataPlane:
    """The caches of ``nodes``, the datasets' ``sizes`` by name (see the module docstring)."""

    def __init__(self, nodes: Sequence[str], sizes: Mapping[str, int], model: CacheModel) -> None:
        self.model = model
        self.stats = DataStats()
        self._sizes = dict(sizes)
        self._caches = {node: NodeCache(model) for node in nodes}
        self._pinned: dict[TaskId, tuple[str, tuple[str, ...]]] = {}  # task -> (node, keys)
        self._landings: list[tuple[float, str]] = []  # (when a fill ends, its node)
        self._changed: set[str] = set()

    def cache(self, node: str) -> NodeCache:
        """Node ``node``'s cache."""
        return self._caches[node]

    def start(self, task: TaskId, node: str, reads: Sequence[tuple[str, str]], now: float) -> float:
        """Task ``task`` starts on ``node`` at ``now`` reading ``reads`` ((name, key) each);
        when all of them are on that node."""
        if task in self._pinned:
            raise EngineInvariantError(f"task {task[1]} of {task[0]} started twice")
        cache = self._caches[node]
        if cache.land(now):
            self._changed.add(node)
        evicted = cache.evictions
        ready, cold, hit, uncached, pinned = now, 0, True, 0, []
        for name, key in reads:
            size = self._sizes.get(name)
            if size is None:
                raise EngineInvariantError(f"dataset {name!r} has no size")
            read = cache.read(key, size, now)
            ready, cold, hit = max(ready, read.ready), cold + read.cold_bytes, hit and read.warm
            if read.cached:
                pinned.append(key)
            else:
                uncached += 1
            if read.cached and not read.warm:  # a fill under way: it lands when it ends
                heapq.heappush(self._landings, (read.ready, node))
        if cache.evictions != evicted:
            self.stats.evictions += cache.evictions - evicted
            self._changed.add(node)
        self._pinned[task] = (node, tuple(pinned))
        if reads:
            self.stats.started(delay=ready - now, cold_bytes=cold, hit=hit, uncached=uncached)
        return ready

    def stop(self, task: TaskId) -> None:
        """Task ``task`` ended (or never started): what it read is no longer pinned."""
        found = self._pinned.pop(task, None)
        if found is not None:
            node, keys = found
            for key in keys:
                self._caches[node].unpin(key)

    def next_landing(self) -> float | None:
        """When the next fill under way ends, or None."""
        return self._landings[0][0] if self._landings else None

    def land(self, now: float) -> None:
        """Land every fill that ended by ``now``."""
        while self._landings and self._landings[0][0] <= now:
            _, node = heapq.heappop(self._landings)
            if self._caches[node].land(now):
                self._changed.add(node)

    def changes(self) -> list[tuple[str, frozenset[str]]]:
        """Each node whose held datasets changed since the last call, with what it holds."""
        found = [(node, self._caches[node].held()) for node in sorted(self._changed)]
        self._changed.clear()
        return found
