"""FGD's target workload: task types (``TaskShape``) and their popularity
(``TargetWorkload``), learnt from observed tasks as the authors' ``GetTypicalPods``.

Guarantees: a ``TaskShape`` is validated and normalised on construction (GPU to the
milli-GPU, GPU models sorted and unique), so equal requests make equal shapes; a
``TargetWorkload``'s popularities are finite, >= 0 and sum to 1, and its per-type arrays
are read-only; learning ranks shapes deterministically (see ``workload_distribution``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from phalanx.domain.errors import InvalidInput

__all__ = [
    "MILLI",
    "TargetWorkload",
    "TaskShape",
    "model_access",
    "most_frequent",
    "workload_distribution",
]

#: Milli-GPUs in one GPU: the resolution of every GPU amount here.
MILLI: Final = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskShape:
    """What one task type asks for: cpu (millicores), memory (bytes), gpu (GPUs), and
    the GPU models it may run on (``gpu_models``, empty: any).

    ``gpu`` is 0, a fraction of one card (``0 < gpu < 1``), or a whole number of
    cards; it is rounded to the nearest milli-GPU on construction. ``gpu_models`` is
    kept sorted and without repeats, so equal constraints make equal shapes. Raises
    ``InvalidInput`` for a negative or non-finite amount, for a GPU request below
    one milli-GPU, for a non-integer request above one card (``1.5``), and for an
    empty model name.
    """

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0
    gpu_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(not isinstance(m, str) or not m for m in self.gpu_models):
            raise InvalidInput(
                f"{self.gpu_models!r} holds an empty or non-text model",
                field="gpu_models",
                fix="name each GPU model, e.g. ('T4', 'V100M32')",
            )
        object.__setattr__(self, "gpu_models", tuple(sorted(set(self.gpu_models))))
        for name in ("cpu", "memory", "gpu"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidInput(
                    f"{value!r} is not a finite amount >= 0", field=name, fix="use a number >= 0"
                )
        milli = round(self.gpu * MILLI)
        if self.gpu > 0 and milli == 0:
            raise InvalidInput(
                f"{self.gpu!r} GPUs is below one milli-GPU", field="gpu", fix="ask for >= 0.001"
            )
        if milli > MILLI and milli % MILLI:
            raise InvalidInput(
                f"{self.gpu!r} GPUs is neither a fraction of one card nor whole cards",
                field="gpu",
                fix="ask for less than 1 GPU, or for an integer number of GPUs",
            )
        object.__setattr__(self, "gpu", milli / MILLI)

    @property
    def gpu_per_card_milli(self) -> int:
        """Free milli-GPU a card needs to serve this task: the fraction, or 1000; 0 if none."""
        return min(round(self.gpu * MILLI), MILLI)

    @property
    def gpu_cards(self) -> int:
        """How many cards this task needs: 0, 1 for a fraction, or the whole-card count."""
        milli = round(self.gpu * MILLI)
        return 0 if milli == 0 else max(1, milli // MILLI)


def _read_only(array: NDArray[np.generic]) -> None:
    array.setflags(write=False)


def _popularity(popularity: ArrayLike, count: int) -> NDArray[np.float64]:
    """``count`` popularities, checked and normalised, read-only."""
    weights = np.array(popularity, dtype=np.float64)
    if weights.shape != (count,):
        raise InvalidInput(
            f"{weights.shape} popularities for {count} task types",
            field="popularity",
            fix="give one popularity per shape",
        )
    if not (np.all(np.isfinite(weights)) and np.all(weights >= 0)):
        raise InvalidInput(
            "popularities must be finite and >= 0", field="popularity", fix="use p_m in [0, 1]"
        )
    total = float(weights.sum())
    if abs(total - 1.0) > 1e-6:
        raise InvalidInput(
            f"popularities sum to {total}, not 1",
            field="popularity",
            fix="normalise them (divide by their sum)",
        )
    normalised: NDArray[np.float64] = weights / total
    _read_only(normalised)
    return normalised


@dataclass(frozen=True, slots=True, eq=False)
class TargetWorkload:
    """Task types ``shapes`` with popularity ``popularity`` (one per shape, summing to 1).

    Build with ``TargetWorkload.of`` or ``workload_distribution``. The per-type arrays
    (``cpu``, ``memory``, ``gpu_per_card_milli``, ``gpu_cards``) are computed once and
    read-only, so one value serves many fragmentation calls.
    """

    shapes: tuple[TaskShape, ...]
    popularity: NDArray[np.float64]
    cpu: NDArray[np.float64] = field(init=False, repr=False)
    memory: NDArray[np.float64] = field(init=False, repr=False)
    gpu_per_card_milli: NDArray[np.int64] = field(init=False, repr=False)
    gpu_cards: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        count = len(self.shapes)
        if count == 0:
            raise InvalidInput("no task types", field="shapes", fix="give at least one TaskShape")
        arrays: dict[str, NDArray[np.generic]] = {
            "popularity": _popularity(self.popularity, count),
            "cpu": np.array([s.cpu for s in self.shapes], dtype=np.float64),
            "memory": np.array([s.memory for s in self.shapes], dtype=np.float64),
            "gpu_per_card_milli": np.array(
                [s.gpu_per_card_milli for s in self.shapes], dtype=np.int64
            ),
            "gpu_cards": np.array([s.gpu_cards for s in self.shapes], dtype=np.int64),
        }
        for name, array in arrays.items():
            _read_only(array)
            object.__setattr__(self, name, array)

    def reweighted(self, popularity: ArrayLike) -> TargetWorkload:
        """The same task types with other popularities (checked as on construction); the
        per-type arrays are shared, not rebuilt."""
        target: TargetWorkload = object.__new__(TargetWorkload)
        for name in ("shapes", "cpu", "memory", "gpu_per_card_milli", "gpu_cards"):
            object.__setattr__(target, name, getattr(self, name))
        object.__setattr__(target, "popularity", _popularity(popularity, len(self.shapes)))
        return target

    @classmethod
    def of(cls, shapes: Sequence[TaskShape], popularity: ArrayLike) -> TargetWorkload:
        """The workload ``{shapes[i]: popularity[i]}``; raises ``InvalidInput`` if malformed."""
        return cls(tuple(shapes), np.asarray(popularity, dtype=np.float64))


def workload_distribution(
    observed: Iterable[TaskShape], *, coverage: float = 1.0, include_cpu_only: bool = True
) -> TargetWorkload:
    """The target workload learnt from observed tasks: each distinct shape's frequency.

    Shapes are ranked by count (most frequent first; ties by gpu, then cpu, then
    memory, then GPU models, ascending), so the result is deterministic. ``coverage`` < 1 keeps only
    the most frequent shapes, one at a time, until they account for at least that
    share of the tasks, then renormalises; ``include_cpu_only=False`` drops shapes
    that ask for no GPU first. This is the authors' ``GetTypicalPods``
    (``pkg/utils/frag.go``); their experiments use ``isInvolvedCpuPods: true`` and
    ``podPopularityThreshold: 95`` with step 1 (``scripts/generate_config_and_run.py``),
    that is ``coverage=0.95, include_cpu_only=True``. Their shape key has no memory
    but has the pod's GPU model constraint (``GetPodResource``'s ``GpuType``): build
    shapes with ``memory=0`` and ``gpu_models`` to count shapes as they do.

    Raises ``InvalidInput`` when no shape is left or ``coverage`` is not in (0, 1].
    """
    counts = Counter(s for s in observed if include_cpu_only or s.gpu > 0)
    kept = most_frequent(counts, coverage=coverage)
    covered = sum(count for _, count in kept)
    weights = np.array([count for _, count in kept], dtype=np.float64) / covered
    return TargetWorkload(tuple(shape for shape, _ in kept), weights)


def most_frequent(
    counts: Mapping[TaskShape, int], *, coverage: float
) -> list[tuple[TaskShape, int]]:
    """The shapes ``workload_distribution`` keeps, with their counts, most frequent first
    (shapes counted 0 are left out); the same errors."""
    if not 0 < coverage <= 1:
        raise InvalidInput(
            f"{coverage!r} is not a share of tasks", field="coverage", fix="use 0 < coverage <= 1"
        )
    counts = {shape: count for shape, count in counts.items() if count > 0}
    if not counts:
        raise InvalidInput(
            "no task shapes to learn from", field="observed", fix="pass the tasks of a trace"
        )
    ranked = sorted(
        counts.items(),
        key=lambda item: (-item[1], item[0].gpu, item[0].cpu, item[0].memory, item[0].gpu_models),
    )
    needed = coverage * sum(counts.values())
    kept: list[tuple[TaskShape, int]] = []
    covered = 0
    for shape, count in ranked:
        if covered >= needed:
            break
        kept.append((shape, count))
        covered += count
    return kept


def model_access(workload: TargetWorkload, node_models: Sequence[str | None]) -> NDArray[np.bool_]:
    """``allowed[n, m]``: whether task type m may use node n's GPUs, for ``allowed``
    arguments. A type without ``gpu_models`` may use any node; one with them only nodes
    whose GPU model (``node_models[n]``, None for a node without GPUs) is among them."""
    allowed = np.ones((len(node_models), len(workload.shapes)), dtype=np.bool_)
    for m, shape in enumerate(workload.shapes):
        if shape.gpu_models:
            allowed[:, m] = [model in shape.gpu_models for model in node_models]
    return allowed
