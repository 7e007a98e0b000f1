"""GPU types in the simulator: which curves a job trains by, given where it runs.

A node's GPU type is its ``phalanx.io/gpu-model`` label (unlabelled: ""). A job whose
progress model has curves per GPU type (``ElasticModel.by_model``, Sia's profiles)
trains at the speed of the type its replicas run on:

- on one type: that type's curves; on a type the model has no curves for (or an
  unlabelled node), the default curves (``ElasticModel.profile``), and the run counts
  as a fallback;
- on two or more types at once (until the engine keeps a job on one type): the slower
  type's curves for the whole placement, and the run counts as mixed;
- curves that cannot say what a placement does (a shape their GPU type never has, e.g.
  8 GPUs on one node read by 4-GPU-node curves) are read at the same replicas packed
  as that type's nodes hold them; where they cannot say that either (more nodes than
  the type was measured on), the default curves stand in, packed their way, and the
  run counts as a fallback;
- a fixed-size job (one that does not train by the elastic model) runs its
  ``duration`` at the speed ratio ``duration / seconds on the placement``, the seconds
  from the chosen curves at its row's batch (``fixed_seconds``); where those curves
  cannot say, the default curves', else its duration as it is.

Before a job with curves for two or more of the cluster's types has run, it reports
Sia's bootstrapping points (``bootstrap_rows``): its one-GPU step on each of those
types, as Sia's scheduler is given them, from which a policy ranks the types for it.

A job whose model has no per-type curves (Pollux's homogeneous profiles) is left
exactly as before: the default curves, its duration at speed 1, nothing counted.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from phalanx.sim.elastic.observe import Key
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.progress import fixed_seconds
from phalanx.sim.elastic.throughput import packed, step_times
from phalanx.sim.workload import ElasticModel


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The curves a job trains by where it runs, and the placement it reads them at."""

    profile: AppProfile
    placement: tuple[int, ...]  # GPUs per node: where it runs, or its packed equivalent
    models: tuple[str, ...]  # the GPU models of its nodes, sorted
    fallback: bool  # some model had no curves: the default ones stood in
    mixed: bool  # on two or more models: the slower's curves


def choose(model: ElasticModel, models: Sequence[str], placement: Sequence[int]) -> Choice:
    """The curves a job of ``model`` trains by on ``placement`` (GPUs per node), its nodes
    being of GPU ``models``: the slowest of its types' (``slowest``), read at
    ``placement`` where they cover it, else at the same replicas packed as that type's
    curves pack them on a node (``packed_on``), else the default curves packed so."""
    distinct = tuple(sorted(set(models)))
    found = [model.on(m) for m in distinct]
    profile = slowest([p if p is not None else model.profile for p in found])
    shape = tuple(int(g) for g in placement if g)
    fallback = any(p is None for p in found)
    if not _covers(profile, shape):
        shape = packed_on(profile, sum(shape))
    if not _covers(profile, shape):
        profile, fallback = model.profile, True
        shape = packed_on(profile, sum(shape))
    return Choice(
        profile=profile,
        placement=shape,
        models=distinct,
        fallback=fallback,
        mixed=len(distinct) > 1,
    )


def _covers(profile: AppProfile, placement: tuple[int, ...]) -> bool:
    """Whether ``profile``'s curves say (or bracket) what ``placement`` does."""
    return step_times(profile, placement, profile.min_local_batch, interpolate=True) is not None


def slowest(profiles: Sequence[AppProfile]) -> AppProfile:
    """Of ``profiles``, the one whose step on one GPU at the largest of their smallest
    local batches is the longest (ties: the first by GPU model)."""
    unique = {p.gpu_model: p for p in profiles}
    if len(unique) == 1:
        return next(iter(unique.values()))
    atomic = max(p.min_local_batch for p in unique.values())

    def seconds(profile: AppProfile) -> float:
        found = step_times(profile, (1,), atomic, interpolate=True)
        return math.inf if found is None else found[0]

    return max(sorted(unique.values(), key=lambda p: p.gpu_model), key=seconds)


def packed_on(profile: AppProfile, replicas: int) -> tuple[int, ...]:
    """``replicas`` GPUs packed as many to a node as ``profile`` measured on one node."""
    per_node = max((r for n, r in profile.shapes if n == 1), default=1)
    return packed(replicas, per_node)


def fixed_speed(
    model: ElasticModel, profile: AppProfile, placement: Sequence[int], duration: float
) -> float:
    """Work per second of a fixed-size job of ``model`` whose ``duration`` is its time at
    the default curves' reference placement, running on ``placement`` by ``profile``."""
    seconds = fixed_seconds(profile, placement, model.batch_size, interpolate=True)
    if seconds is None and profile is not model.profile:
        seconds = fixed_seconds(model.profile, placement, model.batch_size, interpolate=True)
    if seconds is None or not seconds > 0 or not duration > 0:
        return 1.0
    return duration / seconds


def bootstrap_rows(
    model: ElasticModel, present: Collection[str]
) -> tuple[tuple[Key, tuple[float, float]], ...]:
    """Sia's bootstrapping points for a job of ``model``: on each GPU model of
    ``present`` it has curves for (sorted), its step and sync seconds on one GPU at the
    largest local batch those curves measured there (at most its largest local batch).
    Empty unless its curves cover two or more of ``present``: one type needs no choice."""
    rows: list[tuple[Key, tuple[float, float]]] = []
    for name in sorted(set(present)):
        profile = model.on(name)
        curve = None if profile is None else profile.shapes.get((1, 1))
        if profile is None or curve is None:
            continue
        local = [int(b) for b in curve[0] if int(b) <= profile.max_local_batch]
        if not local:
            continue
        times = step_times(profile, (1,), max(local), interpolate=True)
        if times is not None:
            rows.append(((name, 1, 1, max(local)), times))
    return tuple(rows) if len(rows) > 1 else ()


@dataclass(slots=True, kw_only=True)
class GpuTypeStats:
    """Which GPU types jobs trained on: per model, the jobs that ran there; the jobs
    that ran on a type their profile has no curves for (at the default curves) and
    those that ran on two types at once (at the slower's)."""

    jobs: dict[str, set[str]] = field(default_factory=dict)
    fallback: set[str] = field(default_factory=set)
    mixed: set[str] = field(default_factory=set)

    def record(self, job: str, choice: Choice) -> None:
        """``job`` runs as ``choice`` says."""
        for model in choice.models:
            self.jobs.setdefault(model, set()).add(job)
        if choice.fallback:
            self.fallback.add(job)
        if choice.mixed:
            self.mixed.add(job)

    def summary(self) -> dict[str, object]:
        """The figures summary.json carries (``gpu_type_*``)."""
        return {
            "gpu_type_jobs": {model or "(none)": len(j) for model, j in sorted(self.jobs.items())},
            "gpu_type_fallback_jobs": len(self.fallback),
            "gpu_type_mixed_jobs": len(self.mixed),
        }
