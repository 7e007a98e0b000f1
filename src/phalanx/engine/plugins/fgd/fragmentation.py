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
  optional ``allowed`` mask; ``workload.model_access`` builds it from the task shapes'
  ``gpu_models`` and the nodes' GPU models, as their ``IsNodeAccessibleToPod``.
- Ties in popularity are broken by shape, not by Go's map order (see
  ``workload.workload_distribution``).

Units: cpu in millicores, memory in bytes, GPU in GPUs. Free card fractions and GPU
requests are rounded to the nearest milli-GPU (the authors' integer unit), so the
comparisons are exact and immune to float drift such as ``0.7 - 0.4 < 0.3``.

Guarantees, for every node n and task type m: ``0 <= F_n(m) <= U_n``, hence
``0 <= F_n(M) <= U_n`` and ``0 <= F(M) <= sum_n U_n``; a node with no free GPU has no
fragment; ``0 <= rate <= 1``. Every function is pure: same arguments, same result.
F_n(m) is computed by the one kernel (``kernel.FragmentKernel``, which the ``fgd``
plugin's memo also uses) on checked input, with no Python loop over nodes or task types.

Checked against the authors' published results: on the empty openb cluster with their
workload settings this gives 13.94% of GPUs fragmented; their 60 runs of the default
trace report 13.88..14.19% at ~0% load (``tests/unit/sim/test_fragmentation.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from phalanx.domain.errors import InvalidInput
from phalanx.engine.plugins.fgd.kernel import FragmentKernel
from phalanx.engine.plugins.fgd.workload import MILLI, TargetWorkload

__all__ = [
    "FragmentationSummary",
    "cards_from_node_totals",
    "fragmentation_summary",
    "node_fragmentation",
    "task_fragments",
]


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
    return FragmentKernel(workload).fragments(nodes.cpu, nodes.cards, mask, nodes.memory) / MILLI


def _node_fragmentation(
    workload: TargetWorkload, nodes: _Nodes, allowed: ArrayLike | None
) -> NDArray[np.float64]:
    """F_n(M) per node, in GPUs, clipped to [0, U_n]."""
    mask = _allowed(allowed, nodes.cards.shape[0], len(workload.shapes))
    fragments = (
        FragmentKernel(workload)
        .fragments(nodes.cpu, nodes.cards, mask, nodes.memory)
        .astype(np.float64)
    )
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
