"""The base of the FGD paper's GPU-fit baselines (bestfit, dotprod, gpupacking,
gpuclustering), and what the paper's placement plugins share: node views in the authors'
units, their card choice, and their tie-break between equal scores.

The authors' simulator (``hkust-adsl/kubernetes-scheduler-simulator``) scores nodes on
two dimensions only: free CPU (millicores) and free GPU (milli-GPU, per card and in
total), normalised by ``MaxSpecCpu = 128000`` and ``MaxSpecGpu = 8000``
(``pkg/type/open-gpu-share/utils/const.go``). Their nodes get a seeded random name
prefix (``rand.Perm`` in ``syncClusterResourceList``, ``pkg/simulator/simulator.go``),
which fixes a random node order for a run; ties between equal integer scores then
follow that order. ``TieBreak`` does the same: with a seed, ties go to the node ranked
first in a seeded random order that is the same for every task. (Drawing a fresh random
node per task instead does not reproduce their figures: on the default trace FGD falls
by about five points of GPU allocation.)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine.cards import WHOLE, CardDemand, Cards
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import Snapshot, TaskInfo

#: The authors' normalisers: the largest node's CPU (millicores) and GPU (milli-GPU).
MAX_SPEC_CPU: Final = 128000.0
MAX_SPEC_GPU: Final = 8000.0
#: Tie-break noise stays below half a point, so it never reorders different integer scores.
_NOISE: Final = 0.5
_MASK64: Final = (1 << 64) - 1


class TieBreak:
    """Seeded noise in [0, 1) per (task, node): a pure function of seed, task name and node.

    With no seed it is zero everywhere, and the engine's rule (lowest node index among
    equal scores) decides.
    """

    def __init__(self, plugin: Plugin[Any], nodes: int) -> None:
        seed = plugin.args.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise PluginError(
                f"plugin {plugin.name!r}: arg 'seed' must be an integer, got {seed!r}"
            )
        self.seed: int | None = seed
        self._order = (
            np.zeros(nodes) if seed is None else self.uniform("node-order", np.arange(nodes))
        )

    def uniform(self, key: str, items: NDArray[np.intp]) -> NDArray[np.float64]:
        """A number in [0, 1) for each of ``items``, fixed by the seed and ``key``."""
        if self.seed is None:
            return np.zeros(len(items))
        base = (zlib.crc32(key.encode()) << 32) ^ (self.seed & _MASK64)
        x = np.asarray(items, dtype=np.uint64) + np.uint64(base & _MASK64)
        # splitmix64 finaliser: a well-mixed 64-bit hash of (base + item)
        with np.errstate(over="ignore"):
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            x = x ^ (x >> np.uint64(31))
        noise: NDArray[np.float64] = (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        return noise

    def noise(self, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """What to add to integer scores of ``nodes`` so that ties go to the node ranked
        first in a seeded random node order, the same for every task (``task`` is unused)."""
        noise: NDArray[np.float64] = self._order[nodes] * _NOISE
        return noise


def free_cpu(snapshot: Snapshot, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
    """Free CPU of ``nodes`` in millicores (0 where the snapshot has no cpu dimension)."""
    cpu = snapshot.dim.get("cpu")
    if cpu is None:
        return np.zeros(len(nodes))
    free: NDArray[np.float64] = snapshot.capacity[nodes, cpu] - snapshot.used[nodes, cpu]
    return free


def free_gpu_milli(cards: Cards, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
    """Free milli-GPU of ``nodes``, summed over their cards (cordoned ones count none)."""
    free: NDArray[np.float64] = np.clip(cards.open_milli(nodes), 0.0, None).sum(axis=1)
    return free


def task_cpu(snapshot: Snapshot, task: TaskInfo) -> float:
    """The task's CPU request in millicores."""
    cpu = snapshot.dim.get("cpu")
    return 0.0 if cpu is None else float(task.role.request[cpu])


def task_gpu_milli(demand: CardDemand | None) -> float:
    """The task's total GPU request in milli-GPU."""
    if demand is None:
        return 0.0
    return demand.milli if demand.shared else demand.whole * WHOLE


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuGpu:
    """The two dimensions the authors' scores read, in their units: each node's free CPU
    (millicores) and free GPU (milli-GPU summed over its cards), and the task's request
    of each."""

    free_cpu: NDArray[np.float64]
    free_gpu: NDArray[np.float64]
    cpu: float
    gpu: float

    @classmethod
    def of(cls, snapshot: Snapshot, task: TaskInfo, nodes: NDArray[np.intp]) -> CpuGpu:
        """``task``'s request against the free room of ``nodes``."""
        return cls(
            free_cpu=free_cpu(snapshot, nodes),
            free_gpu=free_gpu_milli(snapshot.cards, nodes),
            cpu=task_cpu(snapshot, task),
            gpu=task_gpu_milli(task.role.cards),
        )


def best_fit_card(cards: Cards, task: TaskInfo, node: int) -> tuple[int, ...] | None:
    """The authors' ``best`` GPU selection (``allocateGpuIdBasedOnBestFit``), usable as a
    ``gpu_select`` callback as it stands: a share goes to the card with the least free
    milli-GPU that still holds it (lowest index among equals); whole cards are left to
    the engine, whose lowest-index free cards are the authors' ``AllocateExclusiveGpuId``."""
    demand = task.role.cards
    if demand is None or not demand.shared:
        return None
    usable = cards.usable(demand, slice(node, node + 1))[0]
    if not usable.any():
        return None
    free = np.where(usable, cards.milli_free[node], np.inf)
    return (int(np.argmin(free)),)


@dataclass(slots=True)
class Fit:
    """What a GPU-fit baseline's session holds: the snapshot and the tie-break."""

    snapshot: Snapshot
    ties: TieBreak

    @classmethod
    def of(cls, plugin: Plugin[Any], session: Session) -> Fit:
        """The session's state for ``plugin``."""
        snapshot = session.snapshot
        return cls(snapshot, TieBreak(plugin, len(snapshot.nodes)))


F = TypeVar("F", bound=Fit)


class GpuFitPlugin(Plugin[F]):
    """A GPU-fit baseline: states its score formula (``points``) and nothing else.

    The base provides it as a node-local node score (arg ``weight``, default 1) plus the
    ``seed`` tie-break (``TieBreak``: below half a point, so it never reorders different
    integer scores), and gives a share of a GPU to the fullest card that holds it
    (``best_fit_card``, the authors' ``best`` GPU selection; whole cards go to the
    engine's lowest-index free ones).

    Guarantees: integer scores in 0..100 (plus, with ``seed``, a tie-break below half a
    point: a seeded random node order, the same for every task); a node's score depends
    only on that node (``points`` promises it); never picks a card that cannot serve the
    task.
    """

    accepted_args = frozenset({"weight", "seed"})

    def node_score(self, state: F, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        return self.points(state, task, nodes) + state.ties.noise(task, nodes)

    def gpu_select(self, state: F, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        return best_fit_card(state.snapshot.cards, task, node)

    def points(self, state: F, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """The formula: integer points in 0..100 for ``task`` on each of ``nodes``, each
        depending on that node only."""
        raise NotImplementedError


class PlainFitPlugin(GpuFitPlugin[Fit]):
    """A GPU-fit baseline whose session holds the snapshot and the tie-break alone."""

    def open(self, session: Session) -> Fit:
        return Fit.of(self, session)
