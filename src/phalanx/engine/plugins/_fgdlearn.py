"""The target workload ``fgd`` learns from a snapshot: the shapes of its newest jobs' tasks.

Guarantees: ``learn`` gives the same target for the same jobs whether or not a
``RecentJobs`` kept from earlier sessions is passed; a ``RecentJobs`` follows its
snapshot's jobs by identity (a job removed, or replaced under the same name, is
forgotten), so a session pays only for the jobs that arrived or left since the last one.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from dataclasses import replace

from phalanx.domain.job import Role, SelectorOperator
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine.cards import WHOLE
from phalanx.engine.fragmentation import TargetWorkload, TaskShape, workload_from_counts
from phalanx.engine.snapshot import JobInfo, Snapshot

#: one task's shape (as an index into ``RecentJobs.shapes``) and its memory request
Sample = tuple[int, float]


class RecentJobs:
    """One snapshot's jobs in (creation time, name) order, each with its tasks' samples."""

    def __init__(self) -> None:
        self.seen: dict[str, JobInfo] = {}
        self.order: list[tuple[float, str]] = []
        self.samples: dict[str, list[Sample]] = {}
        #: every shape seen (CPU, GPU, GPU models; memory 0), interned
        self.shapes: list[TaskShape] = []
        self._ids: dict[TaskShape, int] = {}

    def sync(self, snapshot: Snapshot) -> None:
        """Follow the snapshot's jobs: forget those gone or replaced, sample the new ones."""
        jobs = snapshot.jobs
        if self.seen == jobs:  # the same names bound to the same JobInfo objects
            return
        for name in self.seen.keys() - jobs.keys():
            self._forget(name)
        for name in jobs.keys() - self.seen.keys():
            self._add(snapshot, jobs[name])
        if self.seen != jobs:  # some job was replaced by another of the same name
            for name in [n for n, info in self.seen.items() if jobs[n] is not info]:
                self._forget(name)
                self._add(snapshot, jobs[name])

    def _forget(self, name: str) -> None:
        info = self.seen.pop(name)
        del self.order[bisect_left(self.order, (info.creation_time, name))]
        del self.samples[name]

    def _add(self, snapshot: Snapshot, info: JobInfo) -> None:
        self.seen[info.name] = info
        insort(self.order, (info.creation_time, info.name))
        self.samples[info.name] = self._sample(snapshot, info)

    def index(self, shape: TaskShape) -> int:
        """The index of a shape seen before."""
        return self._ids[shape]

    def newest(self, window: int) -> list[Sample]:
        """The samples of the tasks of the ``window`` newest jobs."""
        return [s for _, name in self.order[-window:] for s in self.samples[name]]

    def _sample(self, snapshot: Snapshot, job: JobInfo) -> list[Sample]:
        """Each task's shape (CPU, GPU, GPU models) and memory request."""
        cpu, gpu, memory = (snapshot.dim.get(r) for r in ("cpu", "gpu", "memory"))
        by_role: dict[int, Sample] = {}
        out = []
        for task in job.tasks:
            sample = by_role.get(task.role.index)
            if sample is None:
                request = task.role.request
                shape = TaskShape(
                    cpu=0.0 if cpu is None else float(request[cpu]),
                    gpu=0.0 if gpu is None else float(request[gpu]) / WHOLE,
                    gpu_models=gpu_models(task.role.spec),
                )
                index = self._ids.setdefault(shape, len(self.shapes))
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
) -> TargetWorkload | None:
    """The shapes of the tasks of the ``window`` newest jobs (None when there is none).

    Shapes are told apart by CPU, GPU and GPU models, as the authors' (memory requests
    vary too much to group by); with ``memory`` each shape asks for the median memory
    of its tasks. ``recent`` carries what earlier sessions on this snapshot learnt."""
    if recent is None:
        recent = RecentJobs()
    recent.sync(snapshot)
    samples = recent.newest(window)
    if not samples:
        return None
    counts = Counter(index for index, _ in samples)
    target = workload_from_counts(
        {recent.shapes[index]: count for index, count in counts.items()}, coverage=coverage
    )
    if not memory or "memory" not in snapshot.dim:
        return target
    asked: dict[int, list[float]] = {}
    for index, amount in samples:
        asked.setdefault(index, []).append(amount)
    with_memory = [replace(s, memory=_median(asked[recent.index(s)])) for s in target.shapes]
    return TargetWorkload.of(with_memory, target.popularity)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def gpu_models(role: Role) -> tuple[str, ...]:
    """The GPU models a role is confined to: the models its node selector and its node
    affinity terms ``In`` name for ``GPU_MODEL_LABEL``, all of them met (empty: any, and
    also when they contradict each other: such a role fits no node anyway)."""
    allowed: set[str] | None = None
    chosen = role.node_selector.get(GPU_MODEL_LABEL)
    if chosen is not None:
        allowed = {chosen}
    for term in role.affinity:
        if term.key == GPU_MODEL_LABEL and term.operator is SelectorOperator.IN:
            values = set(term.values)
            allowed = values if allowed is None else allowed & values
    return () if allowed is None else tuple(sorted(allowed))
