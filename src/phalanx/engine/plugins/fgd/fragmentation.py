"""GPU fragmentation as FGD measures it, vectorised over nodes and task types.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23. Free GPU is "fragmented" for a task
when that task cannot use it; the measure is the expectation of that amount over a
target workload.

Definition (every amount in GPUs, resolved to the milli-GPU)::

    task type m    cpu c_m, memory r_m and a GPU request g_m, which is
                   0 (no GPU), a fraction 0 < g_m < 1 of ONE card (GPU sharing),
                   or a whole number of cards
    node n         free cpu C_n, free memory R_n, free fraction f_nj of each card j;
                   free GPU U_n = sum_j f_nj

    m fits n  <=>  C_n >= c_m and R_n >= r_m and g_m > 0 and
                   (0 < g_m < 1: some card has f_nj >= g_m;
                    g_m integer: at least g_m cards have f_nj = 1)

    F_n(m) = U_n                                   if m does not fit n
           = sum of f_nj over cards with f_nj < t_m    if m fits n
             where t_m = g_m for a fraction, 1 for whole cards
             (the cards m cannot use: too little left, or partly taken)

    F_n(M) = sum_m p_m F_n(m)          M = {m: p_m}, popularities summing to 1
    F(M)   = sum_n F_n(M)              cluster fragmentation
    rate   = F(M) / sum_n U_n          0 when no GPU is free

A task that asks for no GPU (g_m = 0) cannot use any GPU, so all free GPU on every
node is a fragment for it, whether or not its CPU and memory fit. Source: the authors'
simulator, ``hkust-adsl/kubernetes-scheduler-simulator`` at commit 29a1e4c4,
``pkg/utils/frag.go``: ``GetNodePodFrag`` classes a pod with ``MilliGpu == 0`` as
``XLSatisfied`` or ``XRLackCPU``; ``NodeGpuShareFragAmount`` adds all of
``GetGpuMilliLeftTotal`` for every class but ``Q3Satisfied``; and
``FragAmountSumExceptQ3`` (the amount the FGD score and the reports use) sums every
class but Q3. For Q3 (fits) it adds ``GetGpuFragMilliByNodeResAndPodRes``, the free
milli-GPU of cards whose free amount is below the pod's per-card request (1000 for
whole-card pods). The fit test is ``CanNodeHostPodOnGpuMemory``. The same file is
where this module's ``>=`` comparisons come from.

Where this module differs from the authors' simulator:

- It also checks memory (theirs checks only CPU and GPU). Pass ``free_memory=None``
  (or task shapes with ``memory=0``) to reproduce theirs.
- GPU model constraints (their ``NoAccess`` class: all free GPU is fragment) are an
  optional ``allowed`` mask; ``model_access`` builds it from the task shapes'
  ``gpu_models`` and the nodes' GPU models, as their ``IsNodeAccessibleToPod``.
- Ties in popularity are broken by shape, not by Go's map order (see
  ``workload_distribution``).

Units: cpu in millicores, memory in bytes, GPU in GPUs. Free card fractions and GPU
requests are rounded to the nearest milli-GPU (the authors' integer unit), so the
comparisons are exact and immune to float drift such as ``0.7 - 0.4 < 0.3``.

Guarantees, for every node n and task type m: ``0 <= F_n(m) <= U_n``, hence
``0 <= F_n(M) <= U_n`` and ``0 <= F(M) <= sum_n U_n``; a node with no free GPU has no
fragment; ``0 <= rate <= 1``. Every function is pure: same arguments, same result.
The only Python loop is over card slots (a node has at most 8 in the openb trace),
never over nodes or task types.

Checked against the authors' published results: on the empty openb cluster with their
workload settings this gives 13.94% of GPUs fragmented; their 60 runs of the default
trace report 13.88..14.19% at ~0% load (``tests/unit/sim/test_fragmentation.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from phalanx.domain.errors import InvalidInput

__all__ = [
    "MILLI",
    "FragmentKernel",
    "FragmentationSummary",
    "TargetWorkload",
    "TaskShape",
    "cards_from_node_totals",
    "fragmentation_summary",
    "model_access",
    "node_fragmentation",
    "task_fragments",
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


class _Nodes(NamedTuple):
    """Validated node state: free cpu, free memory (or None) and free milli-GPU per card."""

    cpu: NDArray[np.float64]
    memory: NDArray[np.float64] | None
    cards: NDArray[np.int64]


def _vector(values: ArrayLike, name: str, size: int) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (size,):
        raise InvalidInput(
            f"shape {array.shape} does not match {size} nodes",
            field=name,
            fix="give one value per row of free_cards",
        )
    if np.any(np.isnan(array)):
        raise InvalidInput("contains NaN", field=name, fix="give a number for every node")
    return array


def _milli_cards(free_cards: ArrayLike) -> NDArray[np.int64]:
    cards = np.asarray(free_cards, dtype=np.float64)
    if cards.ndim != 2:
        raise InvalidInput(
            f"expected a (nodes, cards) array, got shape {cards.shape}",
            field="free_cards",
            fix="one row per node, one column per card slot; pad missing cards with 0",
        )
    if not np.all(np.isfinite(cards)):
        raise InvalidInput("contains NaN or inf", field="free_cards", fix="use fractions in [0, 1]")
    milli = np.rint(cards * MILLI).astype(np.int64)
    if np.any(milli < 0) or np.any(milli > MILLI):
        raise InvalidInput(
            "a card's free fraction is outside [0, 1]",
            field="free_cards",
            fix="give each card's free share of one GPU",
        )
    return milli


def _nodes(free_cpu: ArrayLike, free_memory: ArrayLike | None, free_cards: ArrayLike) -> _Nodes:
    cards = _milli_cards(free_cards)
    size = cards.shape[0]
    cpu = _vector(free_cpu, "free_cpu", size)
    memory = None if free_memory is None else _vector(free_memory, "free_memory", size)
    return _Nodes(cpu, memory, cards)


def _allowed(allowed: ArrayLike | None, nodes: int, types: int) -> NDArray[np.bool_] | None:
    if allowed is None:
        return None
    mask = np.asarray(allowed)
    if mask.shape != (nodes, types) or mask.dtype != np.bool_:
        raise InvalidInput(
            f"expected a boolean ({nodes}, {types}) array, got {mask.dtype} {mask.shape}",
            field="allowed",
            fix="allowed[n, m] says whether task type m may run on node n at all",
        )
    return mask


def _fragment_milli(
    workload: TargetWorkload, nodes: _Nodes, allowed: NDArray[np.bool_] | None
) -> NDArray[np.int64]:
    """F_n(m) in milli-GPU, shape (nodes, task types)."""
    need = workload.gpu_per_card_milli[np.newaxis, :]
    usable = np.zeros((nodes.cards.shape[0], need.shape[1]), dtype=np.int64)
    unusable_milli = np.zeros_like(usable)
    for slot in range(nodes.cards.shape[1]):  # card slots only: a handful per node
        free = nodes.cards[:, slot, np.newaxis]
        serves = free >= need
        usable += serves
        unusable_milli += np.where(serves, 0, free)
    fits = (nodes.cpu[:, np.newaxis] >= workload.cpu[np.newaxis, :]) & (
        usable >= workload.gpu_cards[np.newaxis, :]
    )
    fits &= workload.gpu_cards[np.newaxis, :] > 0  # a task without GPU uses none of it
    if nodes.memory is not None:
        fits &= nodes.memory[:, np.newaxis] >= workload.memory[np.newaxis, :]
    if allowed is not None:
        fits &= allowed
    free_total = nodes.cards.sum(axis=1)
    result: NDArray[np.int64] = np.where(fits, unusable_milli, free_total[:, np.newaxis])
    return result


def task_fragments(
    workload: TargetWorkload,
    *,
    free_cpu: ArrayLike,
    free_memory: ArrayLike | None,
    free_cards: ArrayLike,
    allowed: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """F_n(m): GPUs on node n that task type m cannot use, shape (nodes, task types).

    ``free_cpu`` and ``free_memory`` have one value per node (``free_memory=None``: do
    not check memory, as the authors' simulator). ``free_cards`` is (nodes, card
    slots): each card's free fraction in [0, 1]; pad a node with fewer cards with 0
    (a zero card can serve nothing and adds nothing, exactly like a fully used card).
    ``allowed`` (optional, boolean (nodes, task types)) marks where a type may run at
    all, e.g. its GPU model constraint; where False, all free GPU is fragment.

    Each entry is in [0, U_n] and a multiple of 0.001. Raises ``InvalidInput`` for
    mismatched shapes, NaN, or a card fraction outside [0, 1].
    """
    nodes = _nodes(free_cpu, free_memory, free_cards)
    mask = _allowed(allowed, nodes.cards.shape[0], len(workload.shapes))
    return _fragment_milli(workload, nodes, mask) / MILLI


def _node_fragmentation(
    workload: TargetWorkload, nodes: _Nodes, allowed: ArrayLike | None
) -> NDArray[np.float64]:
    """F_n(M) per node, in GPUs, clipped to [0, U_n]."""
    mask = _allowed(allowed, nodes.cards.shape[0], len(workload.shapes))
    fragments = _fragment_milli(workload, nodes, mask).astype(np.float64)
    free = nodes.cards.sum(axis=1) / MILLI
    expected = (fragments @ workload.popularity) / MILLI
    # p sums to 1 only up to rounding; keep the documented bounds exact.
    return np.clip(expected, 0.0, free)


def node_fragmentation(
    workload: TargetWorkload,
    *,
    free_cpu: ArrayLike,
    free_memory: ArrayLike | None,
    free_cards: ArrayLike,
    allowed: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """F_n(M) = sum_m p_m F_n(m) for every node, in GPUs; arguments as ``task_fragments``.

    Each value is in [0, U_n] (U_n = the node's free GPU) and is 0 when U_n is 0.
    """
    nodes = _nodes(free_cpu, free_memory, free_cards)
    return _node_fragmentation(workload, nodes, allowed)


@dataclass(frozen=True, slots=True, kw_only=True)
class FragmentationSummary:
    """Cluster fragmentation and the two ratios the FGD paper and simulator report.

    ``fragmented_gpus`` = F(M); ``free_gpus`` = sum_n U_n; ``capacity_gpus`` = every
    GPU of the cluster, free or not. ``0 <= fragmented_gpus <= free_gpus <=
    capacity_gpus``.
    """

    fragmented_gpus: float
    free_gpus: float
    capacity_gpus: float

    @property
    def rate(self) -> float:
        """Fragmentation rate: fragmented / free GPUs, in [0, 1]; 0 when nothing is free.

        The authors' "Frag ratio" (``pkg/simulator/analysis.go``, ``ClusterGpuFragReport``),
        in percent in their ``analysis_frag_ratio_discrete.csv``.
        """
        return self.fragmented_gpus / self.free_gpus if self.free_gpus > 0 else 0.0

    @property
    def capacity_ratio(self) -> float:
        """Fragmented GPUs / all GPUs of the cluster, in [0, 1]; 0 for a cluster without GPU.

        In percent, the authors' ``analysis_frag_discrete.csv``
        (``experiments/analysis/merge_frag_discrete.py``: frag milli / 1000 / total GPUs).
        """
        return self.fragmented_gpus / self.capacity_gpus if self.capacity_gpus > 0 else 0.0


def fragmentation_summary(
    workload: TargetWorkload,
    *,
    free_cpu: ArrayLike,
    free_memory: ArrayLike | None,
    free_cards: ArrayLike,
    capacity_gpus: float,
    allowed: ArrayLike | None = None,
) -> FragmentationSummary:
    """F(M), the free GPUs and ``capacity_gpus`` (the cluster's GPU count) together.

    Free GPUs are counted from ``free_cards`` after rounding to the milli-GPU. Raises
    ``InvalidInput`` when ``capacity_gpus`` is less than the free GPUs.
    """
    nodes = _nodes(free_cpu, free_memory, free_cards)
    per_node = _node_fragmentation(workload, nodes, allowed)
    free_gpus = float(nodes.cards.sum()) / MILLI
    if not (math.isfinite(capacity_gpus) and capacity_gpus >= free_gpus - 0.5 / MILLI):
        raise InvalidInput(
            f"{capacity_gpus!r} GPUs is less than the {free_gpus} free GPUs",
            field="capacity_gpus",
            fix="give the cluster's total GPU count",
        )
    fragmented = min(float(per_node.sum()), free_gpus)
    return FragmentationSummary(
        fragmented_gpus=fragmented, free_gpus=free_gpus, capacity_gpus=float(capacity_gpus)
    )


def cards_from_node_totals(
    capacity_gpus: ArrayLike, used_gpus: ArrayLike, *, width: int | None = None
) -> NDArray[np.float64]:
    """Per-card free fractions, shape (nodes, width), from per-node GPU totals only.

    APPROXIMATION, for simulators that track only how many GPUs each node has in use:
    the used amount is assumed packed card by card, whole cards first, then one partly
    used card, the rest free. Node n with ``capacity_gpus[n] = 4`` and ``used_gpus[n]
    = 1.3`` becomes ``[0, 0.7, 1, 1]``. Real per-card state can have several partly
    used cards, so the fragmentation computed from this can be lower or higher than
    the true one; use real per-card state once the simulator keeps it.

    ``capacity_gpus`` must be whole numbers >= 0 and ``0 <= used_gpus <=
    capacity_gpus`` (to the milli-GPU). ``width`` (default: the largest capacity) pads
    every row with 0 cards. Raises ``InvalidInput`` otherwise.
    """
    capacity = np.asarray(capacity_gpus, dtype=np.float64)
    if capacity.ndim != 1:
        raise InvalidInput(
            f"expected one value per node, got shape {capacity.shape}",
            field="capacity_gpus",
            fix="pass a 1-D array",
        )
    used = _vector(used_gpus, "used_gpus", capacity.shape[0])
    if not (np.all(np.isfinite(capacity)) and np.all(capacity >= 0)) or np.any(
        capacity != np.round(capacity)
    ):
        raise InvalidInput(
            "GPU capacities must be whole numbers >= 0",
            field="capacity_gpus",
            fix="count the cards of each node",
        )
    cards = capacity.astype(np.int64)
    used_milli = np.rint(used * MILLI).astype(np.int64)
    if (
        not np.all(np.isfinite(used))
        or np.any(used_milli < 0)
        or np.any(used_milli > cards * MILLI)
    ):
        raise InvalidInput(
            "used GPUs must be between 0 and the node's capacity",
            field="used_gpus",
            fix="give each node's GPUs in use",
        )
    widest = int(cards.max()) if cards.size else 0
    columns = widest if width is None else width
    if columns < widest:
        raise InvalidInput(
            f"width {columns} is narrower than a node with {widest} cards",
            field="width",
            fix=f"use width >= {widest} or leave it out",
        )
    slot = np.arange(columns, dtype=np.int64)[np.newaxis, :]
    free_milli = np.clip((slot + 1) * MILLI - used_milli[:, np.newaxis], 0, MILLI)
    free_milli = np.where(slot < cards[:, np.newaxis], free_milli, 0)
    result: NDArray[np.float64] = free_milli / MILLI
    return result


class FragmentKernel:
    """F_n(M) in milli-GPU for many node states at once, for trusted inputs: the hot path
    of the ``fgd`` plugin. Built once per target workload.

    ``free_cpu`` (millicores, one per state) and ``free_cards`` (whole milli-GPUs, states
    x card slots, 0 for slots a node lacks) are not validated, memory is checked only
    when ``free_memory`` is given (the authors' simulator does not), and the result is
    not clipped; otherwise it equals ``node_fragmentation`` x 1000. Card counts and
    unusable amounts are computed once per distinct per-card request of the workload (a
    handful), not per task type, and the sum over task types runs in one fixed order per
    row, so equal rows give bit-equal results.
    """

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        thresholds, self._column = np.unique(workload.gpu_per_card_milli, return_inverse=True)
        self._thresholds = thresholds[np.newaxis, np.newaxis, :]
        self._cards = workload.gpu_cards[np.newaxis, :]
        self._cpu = workload.cpu[np.newaxis, :]
        self._memory = workload.memory[np.newaxis, :]
        self._needs_gpu = workload.gpu_cards[np.newaxis, :] > 0
        self._popularity = workload.popularity[np.newaxis, :]

    def __call__(
        self,
        free_cpu: NDArray[np.float64],
        free_cards: NDArray[np.int64],
        allowed: NDArray[np.bool_] | None = None,
        free_memory: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """F of each state; ``allowed`` (states x task types) and ``free_memory`` (bytes,
        one per state: then memory is checked too) are optional, as in ``task_fragments``."""
        fragments = self.fragments(free_cpu, free_cards, allowed, free_memory)
        expected: NDArray[np.float64] = (fragments * self._popularity).sum(axis=1)
        return expected

    def fragments(
        self,
        free_cpu: NDArray[np.float64],
        free_cards: NDArray[np.int64],
        allowed: NDArray[np.bool_] | None = None,
        free_memory: NDArray[np.float64] | None = None,
    ) -> NDArray[np.int64]:
        """F_n(m) of each state n (rows) for each task type m (columns), before weighting
        by popularity: depends on the task types only, not on their popularity."""
        below = free_cards[:, :, np.newaxis] < self._thresholds  # states x slots x thresholds
        unusable = np.where(below, free_cards[:, :, np.newaxis], 0).sum(axis=1)
        usable = free_cards.shape[1] - below.sum(axis=1)
        fits = (usable[:, self._column] >= self._cards) & self._needs_gpu
        fits &= free_cpu[:, np.newaxis] >= self._cpu
        if free_memory is not None:
            fits &= free_memory[:, np.newaxis] >= self._memory
        if allowed is not None:
            fits &= allowed
        total = free_cards.sum(axis=1)[:, np.newaxis]
        fragments: NDArray[np.int64] = np.where(fits, unusable[:, self._column], total)
        return fragments
