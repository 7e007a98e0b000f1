"""An application profile of Pollux's artifact (``app_profiles/<app>/``), as values.

``phalanx.sim.traces.pollux.read_profile`` reads it from ``placements.csv``
(``placement,local_bsz,step_time,sync_time``: a placement is the GPUs per node as
digits, e.g. ``1244``), ``scalability.csv`` (``num_nodes,num_replicas,...``
for larger jobs) and ``validation-<batch size>.csv`` (``progress,...,grad_sqr,grad_var``
per epoch). Times are seconds; progress counts samples at the smallest profiled batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
from numpy.typing import NDArray

#: Largest local batch per step where Pollux sets one below the profiled maximum; on the
#: default curves only (Sia's per-type curves have no such limit).
MAX_LOCAL_BATCH: Final = {"yolov3": 8}

#: (local batch ascending, step seconds, sync seconds) of one placement or group.
Curve = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


@dataclass(frozen=True, slots=True, kw_only=True)
class GradStats:
    """Per epoch of one profiled batch size: the gradient's squared norm and variance."""

    sqr: NDArray[np.float64]
    var: NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppProfile:
    """One application's measurements: step times by placement, progress and gradient
    statistics by epoch and batch size."""

    name: str
    placements: Mapping[int, Curve]  # placement id -> (local batch, step time, sync time)
    scalability: Mapping[tuple[int, int], Curve]  # (nodes, replicas) -> the same
    #: (nodes, replicas) -> the mean over the placements of that shape (placements.csv),
    #: or the scalability.csv curve: every measured job shape, as Pollux pools them.
    shapes: Mapping[tuple[int, int], Curve]
    progress: NDArray[np.float64]  # where each epoch ends: the least over the batch sizes
    grads: Mapping[int, GradStats]  # profiled batch size -> its statistics, ascending
    max_local_batch: int
    min_local_batch: int
    #: the GPU model its step times were measured on ("": the default curves, for any GPU)
    gpu_model: str = ""

    def slowed(self, factor: float) -> AppProfile:
        """The same profile with every step and sync time ``factor`` times longer (a
        calibration: the application trains ``factor`` times slower than measured);
        itself at 1."""
        if factor == 1.0:
            return self
        return replace(
            self,
            placements={k: _stretched(c, factor) for k, c in self.placements.items()},
            scalability={k: _stretched(c, factor) for k, c in self.scalability.items()},
            shapes={k: _stretched(c, factor) for k, c in self.shapes.items()},
        )

    @property
    def epochs(self) -> int:
        """Epochs a job trains (the shortest validation file's length)."""
        return len(self.progress)

    @property
    def init_batch(self) -> int:
        """The smallest profiled batch size: the unit of progress."""
        return min(self.grads)

    @property
    def max_batch(self) -> int:
        """The largest profiled batch size."""
        return max(self.grads)


def build_profile(
    name: str,
    *,
    placements: Mapping[int, Curve],
    scalability: Mapping[tuple[int, int], Curve],
    validation: Mapping[int, NDArray[np.float64]],
    gpu_model: str = "",
) -> AppProfile:
    """The profile of application ``name`` from its measurements: curves by placement id
    and by (nodes, replicas), and per profiled batch size a table of rows
    (progress, grad_sqr, grad_var) per epoch. Epochs beyond the shortest table are
    dropped. ``gpu_model``: the GPU model the step times were measured on ("": any).
    The largest local batch is the largest measured, except on the default curves of an
    application in ``MAX_LOCAL_BATCH`` (Pollux's limit), which take that limit.
    Raises ValueError when there is no placement or validation data."""
    if not placements or not validation or not all(len(t) for t in validation.values()):
        raise ValueError(f"{name}: no validation or placement profile")
    epochs = min(len(table) for table in validation.values())
    values = {
        batch: np.asarray(table, dtype=np.float64)[:epochs] for batch, table in validation.items()
    }
    largest = int(max(float(curve[0].max()) for curve in placements.values()))
    smallest = int(min(float(curve[0].min()) for curve in placements.values()))
    return AppProfile(
        name=name,
        placements=dict(placements),
        scalability=dict(scalability),
        shapes={**_shape_means(placements), **scalability},
        progress=np.min([v[:, 0] for v in values.values()], axis=0),
        grads={b: GradStats(sqr=v[:, 1], var=v[:, 2]) for b, v in sorted(values.items())},
        max_local_batch=largest if gpu_model else MAX_LOCAL_BATCH.get(name, largest),
        min_local_batch=smallest,
        gpu_model=gpu_model,
    )


def _stretched(curve: Curve, factor: float) -> Curve:
    """``curve`` (local batch, step, sync) with its times ``factor`` times longer."""
    local, step, sync = curve
    return local, step * factor, sync * factor


def _shape_means(placements: Mapping[int, Curve]) -> dict[tuple[int, int], Curve]:
    """Per (nodes, replicas), the mean step and sync time at each local batch over the
    placements of that shape."""
    points: dict[tuple[int, int], dict[float, list[tuple[float, float]]]] = {}
    for placement, (local, step, sync) in placements.items():
        digits = [int(d) for d in str(placement)]
        at = points.setdefault((len(digits), sum(digits)), {})
        for b, s, y in zip(local, step, sync, strict=True):
            at.setdefault(float(b), []).append((float(s), float(y)))
    means: dict[tuple[int, int], Curve] = {}
    for shape, by_batch in points.items():
        batches = sorted(by_batch)
        table = np.array([np.mean(by_batch[b], axis=0) for b in batches], dtype=np.float64)
        means[shape] = (np.array(batches), table[:, 0], table[:, 1])
    return means
