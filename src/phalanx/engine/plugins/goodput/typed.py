"""A job's goodput on each GPU type, learnt as Sia learns it (Subramanya et al., SOSP'23).

A job reports step timings tagged with the GPU type they ran on (``StepTiming.gpu_model``).
Its goodput at ``n`` GPUs of type ``t`` (``type_goodputs``) is:

- measured there (on more than one replica, so that what synchronising costs there is
  known; or it is the reference): its goodput model fitted to its timings on ``t``
  alone, on ``n`` GPUs packed as ``t``'s nodes hold them;
- measured elsewhere: the model of its *reference* type (of those it has run on more
  than one replica, else of all, the one with the most fitting rows; ties to the first
  by name) at the same ``n`` GPUs, nodes recounted for ``t``'s GPUs per node, times the
  ratio of its one-GPU speeds on ``t`` and on the reference (Sia's
  ``--project_throughputs``), so a job measured on one type is estimated on another
  from one bootstrapping point there, never assumed as fast;
- measured nowhere (it has not run): linear, ``n`` times its one-GPU speed on ``t``
  (Sia scores a job that has not run by its one-GPU throughput on each type).

A one-GPU speed is samples per second of a one-replica timing on the type, at the largest
local batch measured there (Sia's bootstrapping throughput); the reference's comes from
its own such timing, else from its model at that batch. A type the job has no one-GPU
timing on counts as the slowest type it has one on (it is not preferred on a guess); a
job with none anywhere is taken as equally fast on every type.

Goodputs are in samples per second at the job's initial batch (measured) or in one-GPU
samples per second (linear); the plugin divides each job's row by one base, so only
ratios within a job matter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.progress import Progress, StepTiming
from phalanx.domain.resources import GPU
from phalanx.engine.goodput import BatchLimits, GoodputModel, throughput
from phalanx.engine.placement.gputypes import GpuTypeIndex
from phalanx.engine.plugins.goodput.models import Fits, fitting_rows, model_of
from phalanx.engine.snapshot import CHARGED, JobInfo, Snapshot
from phalanx.engine.snapshot.units import ENGINE_UNITS


@dataclass(frozen=True, slots=True, kw_only=True)
class TypePool:
    """The GPUs of one type that elastic jobs share in a session: ``capacity`` of them,
    at most ``per_node`` on a node."""

    name: str
    capacity: int
    per_node: int


def on_type(timings: tuple[StepTiming, ...], gpu_model: str) -> tuple[StepTiming, ...]:
    """The timings measured on ``gpu_model``."""
    return tuple(t for t in timings if t.gpu_model == gpu_model)


def one_gpu_speed(timings: tuple[StepTiming, ...]) -> tuple[float, int] | None:
    """Samples per second of the one-replica timing at the largest local batch among
    ``timings`` (ties: the first), with that batch; None without one."""
    single = [t for t in timings if t.replicas == 1 and t.nodes == 1]
    if not single:
        return None
    best = max(single, key=lambda t: t.local_batch)
    return best.local_batch * best.accumulation / best.step_seconds, best.local_batch


def type_goodputs(
    progress: Progress | None, fits: Fits, pools: Sequence[TypePool], most: int
) -> tuple[NDArray[np.float64], bool]:
    """Goodput at 0..``most`` GPUs (columns) on each of ``pools``' types (rows), and
    whether it comes from a goodput model (else it is linear); see the module
    docstring. Column 0 is 0."""
    width = most + 1
    gpus = np.arange(width)
    out = np.zeros((len(pools), width))
    timings = () if progress is None else progress.timings
    per_type = [on_type(timings, pool.name) for pool in pools]
    speeds = [one_gpu_speed(t) for t in per_type]
    reference = _reference(progress, fits, pools, per_type)
    if reference is None:
        known = [s[0] for s in speeds if s is not None]
        slowest = min(known, default=1.0)
        for row, speed in enumerate(speeds):
            out[row] = gpus * (slowest if speed is None else speed[0])
        return out, False
    ref_row, (model, limits) = reference
    ratios = _ratios(model, speeds, ref_row)
    for row, pool in enumerate(pools):
        own = None
        if row != ref_row and _spread(per_type[row]):
            own = model_of(progress, fits, timings=per_type[row])
        used, ratio = (own, 1.0) if own is not None else ((model, limits), ratios[row])
        nodes = np.array([max(1, math.ceil(n / pool.per_node)) for n in gpus[1:]])
        goodput = used[0].optimize(nodes, gpus[1:], used[1]).goodput
        out[row, 1:] = np.maximum(goodput, 0.0) * ratio
    return out, True


def _reference(
    progress: Progress | None,
    fits: Fits,
    pools: Sequence[TypePool],
    per_type: Sequence[tuple[StepTiming, ...]],
) -> tuple[int, tuple[GoodputModel, BatchLimits]] | None:
    """The job's reference type (its row) with its model there: of the types it ran on
    more than one replica, else of all, the one with the most fitting rows (ties: the
    first) where it has a model; None when it has a model on no type."""
    counts = [len(fitting_rows(t)) for t in per_type]
    ranked = sorted(range(len(pools)), key=lambda r: (not _spread(per_type[r]), -counts[r]))
    for row in ranked:
        if not counts[row]:
            return None
        found = model_of(progress, fits, timings=per_type[row])
        if found is not None:
            return row, found
    return None


def _spread(timings: tuple[StepTiming, ...]) -> bool:
    """Whether ``timings`` include a step on more than one replica (they say what
    synchronising costs on that type, not only a bootstrapping point)."""
    return any(t.replicas > 1 for t in timings)


def _ratios(
    model: GoodputModel, speeds: Sequence[tuple[float, int] | None], ref_row: int
) -> list[float]:
    """Each type's one-GPU speed over the reference's (row ``ref_row``, measured with
    ``model``): 1 on the reference; a type without a one-GPU speed, the lowest ratio of
    those with one (1 when none has)."""
    ratios: list[float | None] = []
    for row, speed in enumerate(speeds):
        if row == ref_row or speed is None:
            ratios.append(1.0 if row == ref_row else None)
            continue
        own, batch = speed
        ref = speeds[ref_row]
        if ref is not None and ref[1] == batch:
            base = ref[0]
        else:
            base = float(throughput(model.perf, 1, 1, batch, 0))
        ratios.append(own / base if base > 0 else None)
    known = [r for r in ratios if r is not None]
    lowest = min(known, default=1.0)
    return [lowest if r is None else r for r in ratios]


def type_pools(
    snapshot: Snapshot, index: GpuTypeIndex, elastic: Sequence[JobInfo]
) -> list[TypePool]:
    """Per GPU type of ``index`` (in its order): the GPUs of its schedulable nodes less
    what jobs other than ``elastic`` hold there, and the most GPUs one of them has."""
    gpu = snapshot.dim[GPU]
    unit = ENGINE_UNITS.get(GPU, 1.0)
    ids = index.ids
    typed = ids >= 0
    kinds = len(index.names)
    open_ = snapshot.schedulable
    usable = np.where(open_, snapshot.capacity[:, gpu], 0.0) / unit
    used = np.where(open_, snapshot.used[:, gpu], 0.0) / unit
    total = np.bincount(ids[typed], weights=usable[typed], minlength=kinds)
    held = np.bincount(ids[typed], weights=used[typed], minlength=kinds)
    for job in elastic:
        for task in job.tasks:
            node = task.node
            if task.status in CHARGED and node >= 0 and ids[node] >= 0 and open_[node]:
                held[ids[node]] -= float(task.role.request[gpu]) / unit
    largest = np.zeros(kinds)
    np.maximum.at(largest, ids[typed], usable[typed])
    return [
        TypePool(
            name=name,
            capacity=max(0, math.floor(float(total[k] - held[k]) + 1e-9)),
            per_node=max(1, int(largest[k])),
        )
        for k, name in enumerate(index.names)
    ]
