"""fgd: Fragmentation Gradient Descent, the node and card whose use fragments GPUs least.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23; the rule as their simulator runs it,
``pkg/simulator/plugin/fgd_score.go`` of ``hkust-adsl/kubernetes-scheduler-simulator``.
With F(node) the node's expected fragmentation (``fragmentation`` beside this module, in
milli-GPU, memory not checked, as theirs) against a target workload:

- a node scores ``int(100 x sigmoid((F(before) - F(after)) / 1000))``: 50 when placing
  the task leaves the node's fragmentation as it was, more when it lowers it (with
  ``integerScores: false``, the sigmoid unrounded: kube-scheduler's integer scores make
  nodes whose placements differ by up to about 40 milli-GPU of fragment tie);
- a share of one GPU tries every card that holds it; the node's score is its best
  card's, and that card (the lowest index among equal scores) is the one ``gpu_select``
  gives it; whole cards go to the lowest-index free ones (their
  ``AllocateExclusiveGpuId``; which free cards does not change F), and a task without
  GPU changes only the node's free CPU.

The target workload is either the ``workload`` arg, a list of ``{cpu: millicores, gpu:
GPUs, gpuModels: [model, ...], popularity: weight}`` (weights are normalised; no
``gpuModels``: any model), or learnt from the snapshot: one shape (cpu, gpu, GPU
models) per task of the ``window`` (default 1000) most recently created jobs the
session sees (running or waiting, ordered by creation time then name), the most
frequent shapes covering ``coverage`` (default 0.95) of them, as the authors'
``GetTypicalPods`` with their experiments' settings; it is learnt again once
``relearn`` (default 1) jobs have come into or left the window since it was last
learnt. Either way it is fixed for the session. A task's GPU models are those its
node selector or its node affinity terms ``In`` name for the ``GPU_MODEL_LABEL``
label (other terms are not modelled); a target task type with GPU models cannot use a
node of another model, so all of that node's free GPU is a fragment for it (the
authors' ``NoAccess``).

Performance: a node's score and best card are a pure function of (target, task shape,
node state), node state being its GPU model, its free CPU (and memory) and its cards'
free milli-GPU. States are interned once per change and the results memoised per
snapshot, so a placement makes only the changed node's state new; a score call is array
look-ups plus the computation for states not seen before with this task shape
(vectorised over those states and their cards). A learnt target changes with every
arrival, but mostly in popularity only: what F depends on besides popularity (each
state's fragment per task type, before and after a task that is not a share is placed)
is memoised per set of task types, so a new popularity costs a weighted sum. For a task
without GPU the plugin also gives a node's scores once more such tasks are placed there
(``ahead``: the states they leave, memoised per state), and its scores are per task
class with the target as their basis (``per_class``), so placement keeps them between
jobs and sessions while the target stands.

Guarantees: scores in 0..100, integers unless ``integerScores`` is false (plus, with
``seed``, a tie-break below half a point: a seeded random node order, the same for every
task, as the authors' runs); a node's score depends only on that node; same snapshot
and args give the same scores and cards; never picks a card that cannot serve the task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import InvalidInput, PluginError
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.fgd.learn import RecentJobs, learn
from phalanx.engine.plugins.fgd.memo import States, Tables, task_shape
from phalanx.engine.plugins.fgd.workload import TargetWorkload, TaskShape
from phalanx.engine.plugins.gpufit.base import TieBreak, task_cpu
from phalanx.engine.snapshot import TaskInfo

__all__ = ["FgdPlugin"]

DEFAULT_WINDOW: Final = 1000
_SHAPE_KEYS: Final = frozenset({"cpu", "memory", "gpu", "gpuModels", "popularity"})
DEFAULT_COVERAGE: Final = 0.95


class _Target:
    """One session: the memoised node states, the recent jobs and tie-break, and the
    target's tables, resolved on first use (the jobs may change between sessions)."""

    def __init__(self, plugin: FgdPlugin, session: Session) -> None:
        self.plugin = plugin
        self.snapshot = snapshot = session.snapshot
        memory, integer = plugin.memory, plugin.integer
        self.states = session.kept.get(States, Lifetime.FOLLOWS, memory=memory, integer=integer)
        self.memory_column = snapshot.dim.get("memory") if memory else None
        self.recent = session.kept.get(RecentJobs, Lifetime.FOLLOWS, plugin.window, follow=True)
        self.ties = TieBreak(plugin, len(snapshot.nodes))
        self.tables: list[Tables | None] = []  # this session's, resolved on first use

    def resolve(self) -> Tables | None:
        """The target's tables (None: no target), with the node states brought up to date."""
        if not self.tables:  # first use in this session: the jobs may have changed in between
            plugin = self.plugin
            workload = plugin.fixed or learn(
                self.snapshot,
                plugin.window,
                plugin.coverage,
                memory=plugin.memory,
                recent=self.recent,
                relearn=plugin.relearn,
            )
            self.tables.append(None if workload is None else self.states.for_target(workload))
        self.states.sync(self.snapshot)
        return self.tables[0]

    def asked(self, task: TaskInfo) -> float:
        """The task's memory request, when the target counts memory."""
        column = self.memory_column
        return 0.0 if column is None else float(task.role.request[column])

    def results(
        self, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
        """Scores and best cards of ``nodes`` for ``task``; None without a target."""
        found = self.resolve()
        if found is None:
            return None
        shape = task_shape(task_cpu(self.snapshot, task), task.role.cards, self.asked(task))
        return self.states.lookup(found, shape, self.states.of_node[nodes])


class FgdPlugin(Plugin[_Target]):
    """Nodes and cards whose use lowers (or least raises) the expected GPU fragmentation."""

    name = "fgd"
    accepted_args = frozenset(
        {"weight", "seed", "workload", "window", "coverage", "memory", "relearn", "integerScores"}
    )
    promises = ScorePromises(per_class=True)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.window = int(self.number("window", DEFAULT_WINDOW, minimum=1))
        self.relearn = int(self.number("relearn", 1, minimum=1))
        self.coverage = self.number("coverage", DEFAULT_COVERAGE)
        if not 0 < self.coverage <= 1:
            raise PluginError(
                f"plugin 'fgd': arg 'coverage' must be in (0, 1], got {self.coverage}"
            )
        given = self.args.get("workload")
        self.fixed = None if given is None else _workload(given)
        self.memory = self.flag("memory", False)
        self.integer = self.flag("integerScores", True)

    def open(self, session: Session) -> _Target:
        return _Target(self, session)

    def node_score(
        self, state: _Target, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        found = state.results(task, nodes)
        if found is None:
            return np.zeros(len(nodes))
        return found[0] + state.ties.noise(task, nodes)

    def score_ahead(
        self, state: _Target, task: TaskInfo, node: int, count: int
    ) -> NDArray[np.float64] | None:
        if task.role.cards is not None:  # which cards it takes is chosen as it is placed
            return None
        found = state.resolve()
        if found is None:
            return np.zeros(count)
        snapshot = state.snapshot
        shape = task_shape(task_cpu(snapshot, task), None, state.asked(task))
        scores = state.states.ahead_scores(found, shape, snapshot, node, task.request, count)
        return scores + state.ties.noise(task, np.full(count, node, dtype=np.intp))

    def score_basis(self, state: _Target) -> Tables | None:
        """The target: kept scores stand while it is the same."""
        return state.resolve()

    def gpu_select(self, state: _Target, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        demand = task.role.cards
        if demand is None or not demand.shared:
            return None
        found = state.results(task, np.array([node], dtype=np.intp))
        card = -1 if found is None else int(found[1][0])
        if card < 0 or not state.snapshot.cards.serves(demand, node, (card,)):
            return None
        return (card,)


def _workload(given: object) -> TargetWorkload:
    """The ``workload`` arg as a target workload; ``PluginError`` naming what is wrong."""
    if not isinstance(given, Sequence) or isinstance(given, str) or not given:
        raise PluginError("plugin 'fgd': arg 'workload' must be a non-empty list of task shapes")
    shapes, weights = [], []
    for i, item in enumerate(given):
        if not isinstance(item, Mapping) or set(item) - _SHAPE_KEYS:
            raise PluginError(
                f"plugin 'fgd': workload[{i}] must be a map of {', '.join(sorted(_SHAPE_KEYS))}"
            )
        models = item.get("gpuModels", [])
        if isinstance(models, str) or not isinstance(models, Sequence):
            raise PluginError(f"plugin 'fgd': workload[{i}].gpuModels must be a list of models")
        try:
            shapes.append(
                TaskShape(
                    cpu=float(item.get("cpu", 0)),
                    memory=float(item.get("memory", 0)),
                    gpu=float(item.get("gpu", 0)),
                    gpu_models=tuple(models),
                )
            )
        except (TypeError, ValueError, InvalidInput) as error:
            raise PluginError(f"plugin 'fgd': workload[{i}]: {error}") from error
        weight = item.get("popularity", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight >= 0:
            raise PluginError(f"plugin 'fgd': workload[{i}].popularity must be a number >= 0")
        weights.append(float(weight))
    total = sum(weights)
    if total <= 0:
        raise PluginError("plugin 'fgd': the workload's popularities sum to 0")
    return TargetWorkload.of(shapes, [w / total for w in weights])
