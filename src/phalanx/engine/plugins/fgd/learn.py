"""The target workload ``fgd`` learns from a snapshot: the shapes of its newest jobs' tasks.

Guarantees: with ``relearn`` 1 (the default), ``learn`` gives the same target for the
same jobs whether or not a ``RecentJobs`` kept from earlier sessions is passed. A
``RecentJobs`` that follows its snapshot (``Snapshot.watch_jobs``) is told of every job
tracked or dropped (a job replaced under the same name is one of each) and keeps the
window's shape counts and memory requests as they come and go, so a session pays
nothing for the jobs, only for learning again when the window changed.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from dataclasses import replace

import numpy as np

from phalanx.domain.job import Role, SelectorOperator
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine.cards import WHOLE
from phalanx.engine.plugins.fgd.workload import TargetWorkload, TaskShape, most_frequent
from phalanx.engine.snapshot import JobInfo, Snapshot

#: one task's shape (as an index into ``RecentJobs.shapes``) and its memory request
Sample = tuple[int, float]


class RecentJobs:
    """One snapshot's jobs in (creation time, name) order and the samples of the ``window``
    newest jobs' tasks counted by shape; with ``follow``, kept up to date as the snapshot
    tracks and drops jobs. A job is sampled once it is in the window (and kept), so the
    jobs that never are cost a place in the order only."""

    def __init__(self, snapshot: Snapshot, window: int, *, follow: bool = False) -> None:
        self.window = window
        self.order: list[tuple[float, str]] = []
        self._snapshot = snapshot
        #: the samples of every job in the window (and of some that were)
        self.samples: dict[str, list[Sample]] = {}
        #: every shape seen (CPU, GPU, GPU models; memory 0), interned
        self.shapes: list[TaskShape] = []
        self._ids: dict[TaskShape, int] = {}
        #: the window's tasks per shape, and each shape's memory requests in order
        self.counts: Counter[int] = Counter()
        self.memory: dict[int, list[float]] = {}
        #: bumped whenever the window's samples change
        self.version = 0
        self.learnt: dict[tuple[float, bool], tuple[int, TargetWorkload | None]] = {}
        self._with_memory: dict[tuple[int, float], TaskShape] = {}
        #: (cpu, gpu, GPU models) -> index into ``shapes``: a shape is built once, not per job
        self._keys: dict[tuple[float, float, tuple[str, ...]], int] = {}
        # read in at once: sorted once, the window sampled and counted once
        self.order = sorted((info.creation_time, info.name) for info in snapshot.jobs.values())
        for _, name in self.order[-window:]:
            self._count(self._of(name), +1)
        if follow:
            snapshot.watch_jobs(self)

    def joined(self, snapshot: Snapshot, info: JobInfo) -> None:
        """Sample a job the snapshot now tracks."""
        key = (info.creation_time, info.name)
        at = bisect_left(self.order, key)
        self.order.insert(at, key)
        start = max(0, len(self.order) - self.window)
        if at >= start:  # it is in the window; the oldest one there (if over) goes out
            self.samples[info.name] = self._sample(snapshot, info)
            self._count(self.samples[info.name], +1)
            if start > 0:
                self._count(self.samples[self.order[start - 1][1]], -1)

    def left(self, info: JobInfo) -> None:
        """Forget a job the snapshot no longer tracks."""
        name = info.name
        at = bisect_left(self.order, (info.creation_time, name))
        start = max(0, len(self.order) - self.window)
        del self.order[at]
        if at >= start:  # it was in the window; the next older job (if any) comes in
            self._count(self.samples[name], -1)
            if start > 0:
                self._count(self._of(self.order[start - 1][1]), +1)
        self.samples.pop(name, None)

    def _count(self, samples: list[Sample], sign: int) -> None:
        if not samples:
            return
        self.version += 1
        for index, amount in samples:
            self.counts[index] += sign
            asked = self.memory.setdefault(index, [])
            if sign > 0:
                insort(asked, amount)
            else:
                del asked[bisect_left(asked, amount)]

    def index(self, shape: TaskShape) -> int:
        """The index of a shape seen before (memory 0)."""
        return self._ids[shape]

    def shape(self, index: int, memory: bool) -> TaskShape:
        """Shape ``index``; with ``memory``, asking for the median memory of its tasks
        in the window."""
        shape = self.shapes[index]
        if not memory:
            return shape
        key = (index, _median(self.memory[index]))
        found = self._with_memory.get(key)
        if found is None:
            found = self._with_memory[key] = replace(shape, memory=key[1])
        return found

    def _of(self, name: str) -> list[Sample]:
        """The samples of job ``name`` (tracked by the snapshot), sampled on first need."""
        found = self.samples.get(name)
        if found is None:
            found = self.samples[name] = self._sample(self._snapshot, self._snapshot.jobs[name])
        return found

    def _sample(self, snapshot: Snapshot, job: JobInfo) -> list[Sample]:
        """Each task's shape (CPU, GPU, GPU models) and memory request."""
        cpu, gpu, memory = (snapshot.dim.get(r) for r in ("cpu", "gpu", "memory"))
        by_role: dict[int, Sample] = {}
        out = []
        for task in job.tasks:
            sample = by_role.get(task.role.index)
            if sample is None:
                request = task.role.request
                key = (
                    0.0 if cpu is None else float(request[cpu]),
                    0.0 if gpu is None else float(request[gpu]) / WHOLE,
                    gpu_models(task.role.spec),
                )
                index = self._keys.get(key, -1)
                if index < 0:
                    shape = TaskShape(cpu=key[0], gpu=key[1], gpu_models=key[2])
                    index = self._keys[key] = self._ids.setdefault(shape, len(self.shapes))
                    if index == len(self.shapes):
                        self.shapes.append(shape)
                asked = 0.0 if memory is None else float(request[memory])
                sample = by_role[task.role.index] = (index, asked)
            out.append(sample)
        return out


def learn(
    snapshot: Snapshot,
    window: int,
    coverage: float,
    *,
    memory: bool = False,
    recent: RecentJobs | None = None,
    relearn: int = 1,
) -> TargetWorkload | None:
    """The shapes of the tasks of the ``window`` newest jobs (None when there is none).

    Shapes are told apart by CPU, GPU and GPU models, as the authors' (memory requests
    vary too much to group by); with ``memory`` each shape asks for the median memory
    of its tasks. ``recent`` (for the same ``window``, following the snapshot) carries
    what earlier sessions on this snapshot learnt; with it, the target learnt last is
    kept until ``relearn`` jobs (at least one) have come into or left the window since:
    a target is then at most ``relearn - 1`` such changes old, and unchanged targets keep
    their memoised scores."""
    if recent is None or recent.window != window:
        recent = RecentJobs(snapshot, window)
    memory = memory and "memory" in snapshot.dim
    known = recent.learnt.get((coverage, memory))
    if known is not None and recent.version - known[0] < max(relearn, 1):
        return known[1]
    counts = {recent.shapes[index]: count for index, count in recent.counts.items() if count}
    target = None
    if counts:
        kept = most_frequent(counts, coverage=coverage)
        covered = sum(count for _, count in kept)
        shapes = tuple(recent.shape(recent.index(s), memory) for s, _ in kept)
        weights = np.array([count for _, count in kept], dtype=np.float64) / covered
        last = known[1] if known is not None else None
        if last is not None and last.shapes == shapes:  # the usual case: only counts moved
            target = last.reweighted(weights)
        else:
            target = TargetWorkload(shapes, weights)
    recent.learnt[(coverage, memory)] = (recent.version, target)
    return target


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def gpu_models(role: Role) -> tuple[str, ...]:
    """The GPU models a role is confined to: the models its ``gpu_types``, its node
    selector and its node affinity terms ``In`` name for ``GPU_MODEL_LABEL``, all of them
    met (empty: any, and also when they contradict each other: such a role fits no node
    anyway)."""
    allowed: set[str] | None = set(role.gpu_types) if role.gpu_types else None
    chosen = role.node_selector.get(GPU_MODEL_LABEL)
    if chosen is not None:
        allowed = {chosen} if allowed is None else allowed & {chosen}
    for term in role.affinity:
        if term.key == GPU_MODEL_LABEL and term.operator is SelectorOperator.IN:
            values = set(term.values)
            allowed = values if allowed is None else allowed & values
    return () if allowed is None else tuple(sorted(allowed))
