"""The fgd plugin's memo: interned node states, and what F and the scores derive from them.

A node state is its GPU model, free CPU (and memory, when checked) and its cards' free
milli-GPU. ``States`` interns them per snapshot; for a set of task types a ``Basis``
keeps each state's fragment per task type (and, for tasks that are not shares, once such
a task is placed); for a target (task types and popularity) ``Tables`` keeps F per
state, score and card per (task shape, state), and the scores of the states further
tasks without GPU leave a state in (``States.ahead_scores``). Results are pure functions
of the state, so they are kept across sessions of a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine.cards import WHOLE, CardDemand
from phalanx.engine.plugins.fgd.kernel import FragmentKernel
from phalanx.engine.plugins.fgd.workload import TargetWorkload, TaskShape, model_access
from phalanx.engine.snapshot import Snapshot

_TARGETS_KEPT: Final = 4  # memo tables kept per snapshot, for as many target workloads
_AFTER_KEPT: Final = 16  # task shapes whose placed-state fragments a basis keeps
_Row = TypeVar("_Row", np.float64, np.int32)

#: (cpu millicores, memory bytes, milli-GPU each card must have free, cards): what F
#: depends on in a task (memory is 0 unless the plugin checks memory)
Shape = tuple[float, float, int, int]


def task_shape(cpu: float, demand: CardDemand | None, memory: float = 0.0) -> Shape:
    """The part of a task the fragmentation score depends on."""
    if demand is None:
        return (cpu, memory, 0, 0)
    if demand.shared:
        return (cpu, memory, round(demand.milli), 1)
    return (cpu, memory, round(WHOLE), demand.whole)


class Grow:
    """A float array indexed by state id that grows on demand; NaN means not known yet."""

    def __init__(self) -> None:
        self.values = np.full(64, np.nan)

    def at(self, ids: NDArray[np.int64], size: int) -> NDArray[np.float64]:
        if size > len(self.values):
            grown = np.full(max(size, 2 * len(self.values)), np.nan)
            grown[: len(self.values)] = self.values
            self.values = grown
        found: NDArray[np.float64] = self.values[ids]
        return found


class Basis:
    """What F depends on in a target but its popularity: the kernel of its task types, the
    GPU models each may use, and each state's fragment per task type (memoised)."""

    def __init__(self, target: TargetWorkload, models: Sequence[str | None]) -> None:
        self.kernel = FragmentKernel(target)
        constrained = any(shape.gpu_models for shape in target.shapes)
        #: GPU model id x task type: may the type use GPUs of that model (None: every type any)
        self.access = model_access(target, models) if constrained else None
        self.rows = np.zeros((64, len(target.shapes)))
        self.known = np.zeros(64, dtype=np.bool_)
        #: per task shape (the most recent ``_AFTER_KEPT``), fragments per task type in
        #: milli-GPU once the task is placed on a state
        self._after: dict[Shape, tuple[NDArray[np.int32], NDArray[np.bool_]]] = {}

    def allowed(self, models: NDArray[np.int64]) -> NDArray[np.bool_] | None:
        """The kernel's ``allowed`` rows for states of GPU models ``models``."""
        if self.access is None:
            return None
        rows: NDArray[np.bool_] = self.access[models]
        return rows

    def grow(self, size: int) -> None:
        """Room for ``size`` states."""
        self.rows, self.known = _grown(self.rows, self.known, size)

    def after(self, shape: Shape, size: int) -> tuple[NDArray[np.int32], NDArray[np.bool_]]:
        """The memo of each state's fragments per task type once a task of ``shape`` (not a
        share: those try every card) is placed on it, and which states it holds; room for
        ``size`` states."""
        found = self._after.pop(shape, None)  # re-inserted: the dict runs least recent first
        if found is None:
            if len(self._after) >= _AFTER_KEPT:
                self._after.pop(next(iter(self._after)))
            found = (np.zeros((0, self.rows.shape[1]), dtype=np.int32), self.known[:0])
        memo, known = self._after[shape] = _grown(*found, size)
        return memo, known


def _grown(
    rows: NDArray[_Row], known: NDArray[np.bool_], size: int
) -> tuple[NDArray[_Row], NDArray[np.bool_]]:
    """``rows`` and ``known`` with room for ``size`` states (new rows unknown)."""
    if size <= len(known):
        return rows, known
    size = max(size, 2 * len(known), 64)
    bigger = np.zeros((size, rows.shape[1]), dtype=rows.dtype)
    bigger[: len(rows)] = rows
    more = np.zeros(size, dtype=np.bool_)
    more[: len(known)] = known
    return bigger, more


class Tables:
    """Memoised results for one target workload: F per state, score and card per (shape,
    state); fragments per task type come from the basis its task types share."""

    def __init__(self, target: TargetWorkload, basis: Basis) -> None:
        self.basis = basis
        self.popularity = target.popularity[np.newaxis, :]
        self.frag = Grow()
        self.scores: dict[Shape, tuple[Grow, Grow]] = {}
        #: per (shape, what one task takes of free CPU and memory, state): the scores of the
        #: states one, two, .. more such tasks leave (``States.ahead_scores``)
        self.ahead: dict[tuple[Shape, tuple[float, float], int], NDArray[np.float64]] = {}


class States:
    """Interned node states (GPU model, free CPU, free memory when checked, free milli-GPU
    per card) of one snapshot's nodes, and their scores: integer points, as the authors'
    (``integer``), or the unrounded sigmoid."""

    def __init__(self, snapshot: Snapshot, *, memory: bool, integer: bool = True) -> None:
        n, slots = snapshot.cards.milli_free.shape
        self.cpu_column = snapshot.dim.get("cpu")
        self.memory_column = snapshot.dim.get("memory") if memory else None
        self.checks_memory = memory
        self.integer = integer
        labels = snapshot.label_column(GPU_MODEL_LABEL)
        #: the nodes' GPU models (None: no label), and each node's index into them
        self.models: list[str | None] = sorted({m for m in labels if m is not None})
        self.models.append(None)
        index = {model: i for i, model in enumerate(self.models)}
        self.node_model = np.array([index[m] for m in labels], dtype=np.int64)
        self.seen = -1  # the snapshot's ``changes`` when the nodes were last interned
        self.of_node = np.zeros(n, dtype=np.int64)
        self.ids: dict[bytes, int] = {}
        self.cpu = np.zeros(64)
        self.memory = np.zeros(64)
        self.cards = np.zeros((64, slots), dtype=np.int64)
        self.model = np.zeros(64, dtype=np.int64)
        self.tables: dict[tuple[object, ...], Tables] = {}
        self.bases: dict[tuple[TaskShape, ...], Basis] = {}

    def sync(self, snapshot: Snapshot) -> None:
        """Re-intern the nodes whose usage changed since they were last interned."""
        changed = snapshot.changed_nodes(self.seen)
        self.seen = snapshot.changes
        if not changed.size:
            return
        cpu = self._free(snapshot, self.cpu_column, changed)
        memory = self._free(snapshot, self.memory_column, changed)
        cards = np.rint(np.clip(snapshot.cards.open_milli(changed), 0.0, None)).astype(np.int64)
        self._intern(changed, cpu, memory, cards)

    @staticmethod
    def _free(
        snapshot: Snapshot, column: int | None, rows: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        if column is None:
            return np.zeros(len(rows))
        free: NDArray[np.float64] = snapshot.capacity[rows, column] - snapshot.used[rows, column]
        return free

    def _intern(
        self,
        changed: NDArray[np.intp],
        cpu: NDArray[np.float64],
        memory: NDArray[np.float64],
        cards: NDArray[np.int64],
    ) -> None:
        self.of_node[changed] = self._ids_of(self.node_model[changed], cpu, memory, cards)

    def _ids_of(
        self,
        models: NDArray[np.int64],
        cpu: NDArray[np.float64],
        memory: NDArray[np.float64],
        cards: NDArray[np.int64],
    ) -> NDArray[np.int64]:
        """The state id of each row (GPU model, free CPU, memory and cards), new ones added."""
        count = len(models)
        ids = np.empty(count, dtype=np.int64)
        parts = (models, cpu, memory, cards)  # each row's bytes, side by side: its key
        raw = np.hstack([np.ascontiguousarray(p).view(np.uint8).reshape(count, -1) for p in parts])
        blob, width = raw.tobytes(), raw.shape[1]
        for row in range(count):
            key = blob[row * width : (row + 1) * width]
            state = self.ids.get(key)
            if state is None:
                state = self.ids[key] = len(self.ids)
                if state >= len(self.cpu):
                    self.cpu = np.concatenate([self.cpu, np.zeros(len(self.cpu))])
                    self.memory = np.concatenate([self.memory, np.zeros(len(self.memory))])
                    self.cards = np.concatenate([self.cards, np.zeros_like(self.cards)])
                    self.model = np.concatenate([self.model, np.zeros_like(self.model)])
                self.cpu[state] = cpu[row]
                self.memory[state] = memory[row]
                self.cards[state] = cards[row]
                self.model[state] = models[row]
            ids[row] = state
        return ids

    def ahead_scores(
        self,
        tables: Tables,
        shape: Shape,
        snapshot: Snapshot,
        node: int,
        request: NDArray[np.float64],
        count: int,
    ) -> NDArray[np.float64]:
        """Scores of ``shape`` on the states ``node`` will be in once 1, 2, .. ``count`` more
        tasks asking ``request`` and no cards are placed there, memoised per state: engine
        amounts are whole numbers, so what a state's free CPU and memory become is the same
        whichever node is in it."""
        taken = tuple(
            0.0 if column is None else float(request[column])
            for column in (self.cpu_column, self.memory_column)
        )
        key = (shape, (taken[0], taken[1]), int(self.of_node[node]))
        known = tables.ahead.get(key)
        if known is None or len(known) < count:
            known = self.lookup(tables, shape, self.ahead(snapshot, node, request, count))[0]
            tables.ahead[key] = known
        return known[:count]

    def ahead(
        self, snapshot: Snapshot, node: int, request: NDArray[np.float64], count: int
    ) -> NDArray[np.int64]:
        """The states ``node`` will be in once 1, 2, .. ``count`` more tasks asking
        ``request`` and no cards are placed there (each added to the use before it, as the
        snapshot adds them)."""
        steps = np.empty((count + 1, len(request)))
        steps[0] = snapshot.used[node]
        steps[1:] = request
        used = np.add.accumulate(steps, axis=0)[1:]
        rows = np.full(count, node, dtype=np.intp)

        def free(column: int | None) -> NDArray[np.float64]:
            if column is None:
                return np.zeros(count)
            left: NDArray[np.float64] = snapshot.capacity[rows, column] - used[:, column]
            return left

        cards = np.rint(np.clip(snapshot.cards.open_milli(rows), 0.0, None)).astype(np.int64)
        return self._ids_of(
            self.node_model[rows], free(self.cpu_column), free(self.memory_column), cards
        )

    def _kernel(
        self,
        tables: Tables,
        cpu: NDArray[np.float64],
        memory: NDArray[np.float64],
        cards: NDArray[np.int64],
        models: NDArray[np.int64],
    ) -> NDArray[np.float64]:
        """F of the given node states (free CPU, memory, cards and GPU model per row)."""
        basis = tables.basis
        fragments = basis.kernel.fragments(
            cpu, cards, basis.allowed(models), memory if self.checks_memory else None
        )
        expected: NDArray[np.float64] = (fragments * tables.popularity).sum(axis=1)
        return expected

    def for_target(self, target: TargetWorkload) -> Tables:
        key = (target.shapes, tuple(target.popularity.tolist()))
        tables = self.tables.get(key)
        if tables is None:
            if len(self.tables) >= _TARGETS_KEPT:
                self.tables.pop(next(iter(self.tables)))
            basis = self.bases.get(target.shapes)
            if basis is None:
                if len(self.bases) >= _TARGETS_KEPT:
                    self.bases.pop(next(iter(self.bases)))
                basis = self.bases[target.shapes] = Basis(target, self.models)
            tables = self.tables[key] = Tables(target, basis)
        return tables

    def fragmentation(self, tables: Tables, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """F of each state against the target, memoised (per task type across targets of
        the same task types)."""
        known = tables.frag.at(states, len(self.ids))
        missing = np.flatnonzero(np.isnan(known))
        if missing.size:
            todo = np.unique(states[missing])
            basis = tables.basis
            basis.grow(len(self.ids))
            new = todo[~basis.known[todo]]
            if new.size:
                basis.rows[new] = basis.kernel.fragments(
                    self.cpu[new],
                    self.cards[new],
                    basis.allowed(self.model[new]),
                    self.memory[new] if self.checks_memory else None,
                )
                basis.known[new] = True
            tables.frag.values[todo] = (basis.rows[todo] * tables.popularity).sum(axis=1)
            known = tables.frag.values[states]
        return known

    def lookup(
        self, tables: Tables, shape: Shape, states: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Score and best card (-1: none) of ``shape`` on each state, memoised."""
        if shape not in tables.scores:
            tables.scores[shape] = (Grow(), Grow())
        score_of, card_of = tables.scores[shape]
        scores = score_of.at(states, len(self.ids))
        card_of.at(states, len(self.ids))
        missing = np.flatnonzero(np.isnan(scores))
        if missing.size:
            todo = np.unique(states[missing])
            new_scores, new_cards = self._compute(tables, shape, todo)
            score_of.values[todo] = new_scores
            card_of.values[todo] = new_cards
            scores = score_of.values[states]
        return scores, card_of.values[states]

    def _compute(
        self, tables: Tables, shape: Shape, states: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        cpu_req, memory_req, per_card, count = shape
        cpu, memory, cards = self.cpu[states], self.memory[states], self.cards[states]
        scores, best = np.zeros(len(states)), np.full(len(states), -1.0)
        fits = (cpu >= cpu_req) & (memory >= memory_req)
        if count:
            fits &= (cards >= per_card).sum(axis=1) >= count
        rows = np.flatnonzero(fits)
        if rows.size == 0:
            return scores, best
        before = self.fragmentation(tables, states[rows])
        left_cpu, left_cards = cpu[rows] - cpu_req, cards[rows]
        left_memory, models = memory[rows] - memory_req, self.model[states[rows]]
        if count == 1 and per_card < WHOLE:  # a share: try every card that holds it
            slots = left_cards.shape[1]
            trial = np.repeat(left_cards[:, np.newaxis, :], slots, axis=1)  # rows x card x slot
            chosen = np.arange(slots)
            holds = trial[:, chosen, chosen] >= per_card
            trial[:, chosen, chosen] -= np.where(holds, per_card, 0)
            after = self._kernel(
                tables,
                np.repeat(left_cpu, slots),
                np.repeat(left_memory, slots),
                trial.reshape(-1, slots),
                np.repeat(models, slots),
            ).reshape(len(rows), slots)
            points = np.where(holds, _points(before[:, np.newaxis] - after, self.integer), -1.0)
            best[rows] = np.argmax(points, axis=1)
            scores[rows] = points.max(axis=1)
            return scores, best
        basis = tables.basis
        placed = states[rows]
        memo, known = basis.after(shape, len(self.ids))
        new = np.flatnonzero(~known[placed])
        if new.size:  # F per task type once the task is placed: the same for every target
            trial = left_cards[new].copy()
            if count:  # whole cards: which free ones does not change F; take the first
                free = trial == per_card
                trial[free & (np.cumsum(free, axis=1) <= count)] = 0
            memo[placed[new]] = basis.kernel.fragments(
                left_cpu[new],
                trial,
                basis.allowed(models[new]),
                left_memory[new] if self.checks_memory else None,
            )
            known[placed[new]] = True
        after = (memo[placed] * tables.popularity).sum(axis=1)
        scores[rows] = _points(before - after, self.integer)
        return scores, best


def _points(decrease: NDArray[np.float64], integer: bool) -> NDArray[np.float64]:
    """``100 x sigmoid(decrease / 1000)``, rounded down to an integer when ``integer``;
    rounding noise below 1e-6 milli-GPU is none."""
    x = np.round(decrease, 6) / WHOLE
    points: NDArray[np.float64] = 100.0 / (1.0 + np.exp(-x))
    return np.floor(points) if integer else points
