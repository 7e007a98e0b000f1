"""Extension points. Each carries its combining rule in its type; ``Points`` names every
point of a session, once (``EXTENSION_POINTS``, ``POINT_NAMES`` and the methods a plugin
class provides them by follow it).

Plugins register callbacks during session open, in tier order; a point consults them
in that order. Registering twice for one plugin is refused: it is always a bug.

| type          | rule                                                                  |
|---------------|-----------------------------------------------------------------------|
| OrderPoint    | first non-zero order: keys compared lexicographically in tier order   |
| AllPoint      | every plugin must agree (no plugin: True)                             |
| CheckPoint    | every plugin must pass; the first refusal (a message) is the answer   |
| AnyPoint      | one plugin suffices (no plugin: False)                                |
| VotePoint     | tiered vote: a Reject wins; a Permit ends the walk at its tier's end  |
| VictimPoint   | intersection: a victim must pass every plugin (no plugin: no victims) |
| MaskPoint     | node masks ANDed; the first plugin excluding a node is its reason     |
| ScorePoint    | weighted sum of node scores                                           |
| FirstPoint    | the first plugin with an answer (not None) decides                    |
| EventPoint    | every handler is called, in order                                     |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError

if TYPE_CHECKING:
    from phalanx.engine.framework.confinement import Confinement
    from phalanx.engine.snapshot import JobInfo, QueueInfo, RoleInfo, TaskInfo

A = TypeVar("A")
B = TypeVar("B")
F = TypeVar("F")
R = TypeVar("R")
P = ParamSpec("P")


class _Point(Generic[F]):
    """A named list of (plugin, tier, callback) in registration order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: list[tuple[str, int, F]] = []
        self._registered: set[str] = set()

    def register(self, plugin: str, tier: int, fn: F) -> None:
        """Add ``plugin``'s callback; refuses a second one from the same plugin."""
        if plugin in self._registered:
            raise PluginError(f"plugin {plugin!r} registered twice on {self.name!r}")
        self._registered.add(plugin)
        self._entries.append((plugin, tier, fn))

    @property
    def plugins(self) -> tuple[str, ...]:
        """Names of the registered plugins, in consultation order."""
        return tuple(entry[0] for entry in self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class OrderPoint(_Point[Callable[[A], Any]]):
    """Sort keys: each plugin returns a comparable key, smaller first.

    Comparing the combined tuples is "first plugin with a non-zero order decides".
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._fns: list[Callable[[A], Any]] = []  # the entries' callbacks, in order
        self._judged: list[Callable[[A], Any]] = []  # the entries not ``in_line_only``

    def register(self, plugin: str, tier: int, fn: Callable[[A], Any]) -> None:
        """Add ``plugin``'s callback, one that other points may judge by."""
        self.register_in_line_only(plugin, tier, fn)
        self._judged.append(fn)

    def register_in_line_only(self, plugin: str, tier: int, fn: Callable[[A], Any]) -> None:
        """Add ``plugin``'s callback, a place in line and nothing more: no point of any
        plugin judges by it (it is left out of ``judged_key``)."""
        super().register(plugin, tier, fn)
        self._fns.append(fn)

    # keys are built by list comprehensions: a session builds hundreds of thousands of
    # them when thousands of jobs wait, and a generator costs a resumption per entry

    def key(self, arg: A) -> tuple[Any, ...]:
        """The combined sort key of ``arg``."""
        return tuple([fn(arg) for fn in self._fns])

    def judged_key(self, arg: A) -> tuple[Any, ...]:
        """The part of ``arg``'s key that plugins may judge it by (what eviction's
        memo of failures keys a preemptor by): every entry's but the in-line-only ones."""
        return tuple([fn(arg) for fn in self._judged])

    def length_before(self, tier: int) -> int:
        """How many leading entries of a key come from tiers before ``tier`` (plugins
        register in tier order, so ``key(arg)[:length_before(t)]`` is what they give)."""
        return sum(1 for _, entry_tier, _ in self._entries if entry_tier < tier)

    @property
    def first_tier(self) -> int | None:
        """The tier of the first registered plugin, or None."""
        return self._entries[0][1] if self._entries else None


class AllPoint(_Point[Callable[[A], bool]]):
    """True only when every registered plugin says True."""

    def __call__(self, arg: A) -> bool:
        for _, _, fn in self._entries:  # noqa: SIM110  # all() over a generator costs 2x here
            if not fn(arg):
                return False
        return True

    def first_refusal(self, arg: A) -> str | None:
        """The first plugin that says False, or None."""
        for plugin, _, fn in self._entries:
            if not fn(arg):
                return plugin
        return None


class CheckPoint(_Point[Callable[[A], str | None]]):
    """Every plugin must pass (answer None); the first refusal's message is the answer."""

    def __call__(self, arg: A) -> str | None:
        for _, _, fn in self._entries:
            message = fn(arg)
            if message is not None:
                return message
        return None


class AnyPoint(_Point[Callable[[A], bool]]):
    """True when any registered plugin says True."""

    def __call__(self, arg: A) -> bool:
        for _, _, fn in self._entries:  # noqa: SIM110  # any() over a generator costs 2x here
            if fn(arg):
                return True
        return False


class Vote(Enum):
    """A plugin's answer on a tiered vote."""

    PERMIT = 1
    ABSTAIN = 0
    REJECT = -1


class VotePoint(_Point[Callable[[A], Vote]]):
    """Reject wins; a Permit ends the walk once its tier has voted; no Permit: permitted."""

    def __call__(self, arg: A) -> bool:
        return self.first_rejection(arg) is None

    def first_rejection(self, arg: A) -> str | None:
        """The plugin whose Reject decided, or None when permitted."""
        permitted_tier: int | None = None
        for plugin, tier, fn in self._entries:
            if permitted_tier is not None and tier > permitted_tier:
                return None
            vote = fn(arg)
            if vote is Vote.REJECT:
                return plugin
            if vote is Vote.PERMIT:
                permitted_tier = tier
        return None


class VictimPoint(_Point[Callable[[A, Sequence[B]], Sequence[B]]]):
    """Each plugin filters candidate victims; a victim must pass every plugin (none: no victims).

    A plugin returns the candidates it accepts in the order they were offered (a
    subsequence of them), so each plugin judges what the ones before it accepted and the
    last one's answer is the intersection. A plugin registered with ``each`` judges every
    candidate on its own: which ones it accepts does not depend on the other candidates
    or their order.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._each: list[bool] = []

    def register(self, plugin: str, tier: int, fn: Callable[[A, Sequence[B]], Sequence[B]]) -> None:
        self.add(plugin, tier, fn)

    def add(
        self,
        plugin: str,
        tier: int,
        fn: Callable[[A, Sequence[B]], Sequence[B]],
        *,
        each: bool = False,
    ) -> None:
        """Register a filter; ``each``: it judges every candidate on its own."""
        super().register(plugin, tier, fn)
        self._each.append(each)

    @property
    def in_any_order(self) -> bool:
        """True when every plugin judges each candidate on its own: the victims accepted do
        not depend on the order the candidates are offered in."""
        return all(self._each)

    def __call__(self, preemptor: A, candidates: Sequence[B]) -> list[B]:
        if not self._entries:
            return []
        survivors: Sequence[B] = candidates
        for _, _, fn in self._entries:
            if not survivors:
                break
            survivors = fn(preemptor, survivors)
        return list(survivors)


class MaskPoint(_Point[Callable[[A], NDArray[np.bool_]]]):
    """Node masks over every node of the snapshot, ANDed."""

    def __call__(self, arg: A, size: int) -> tuple[NDArray[np.bool_], dict[str, int]]:
        """The combined mask, and how many nodes each plugin excluded first."""
        mask = np.ones(size, dtype=np.bool_)
        excluded: dict[str, int] = {}
        for plugin, _, fn in self._entries:
            part = fn(arg)
            newly = int(np.count_nonzero(mask & ~part))
            if newly:
                excluded[plugin] = excluded.get(plugin, 0) + newly
            mask &= part
        return mask, excluded


ScoreFn = Callable[[A, NDArray[np.intp]], NDArray[np.float64]]
#: ``(task, node, count)``: the node's scores for the task once 1, 2, .. ``count`` more
#: tasks of its class are placed there, or None when the scorer cannot tell beforehand
AheadFn = Callable[[A, int, int], NDArray[np.float64] | None]


@dataclass(frozen=True, slots=True)
class Scorer:
    """A registered scoring function and the promises it makes.

    ``node_local``: a node's score depends only on that node's own state, so after a
    placement only that node is re-scored. ``fills``: a node's score never drops as
    the node fills up, so the best node stays best until it is full. ``ahead``: the
    node's scores after further placements of the task's class, equal to the very
    floats ``fn`` will give once they are made, so placement can tell how many tasks
    in a row the node wins without placing and re-scoring one at a time.
    ``per_class``: a node's score depends on the task only through its class (its
    request, card demand and tolerations), on the node only through its usage (what
    ``Snapshot.changed_nodes`` follows) and on nothing else but ``basis()`` (when given:
    a learnt target, say), and is the same for the node alone as among others; so a
    class's scores can be kept, through a session and from one to the next while every
    basis is the same object, and only the nodes whose usage changed scored again
    (``ClassScores``).
    """

    fn: ScoreFn[Any]
    weight: float
    node_local: bool
    fills: bool
    ahead: AheadFn[Any] | None = None
    per_class: bool = False
    basis: Callable[[], object] | None = None


class ScorePoint(_Point[Scorer]):
    """Weighted sum of scores over candidate node indices (each plugin: 0..100)."""

    def add(
        self,
        plugin: str,
        tier: int,
        fn: ScoreFn[Any],
        *,
        weight: float = 1.0,
        node_local: bool = True,
        fills: bool = False,
        ahead: AheadFn[Any] | None = None,
        per_class: bool = False,
        basis: Callable[[], object] | None = None,
    ) -> None:
        """Register a scorer with its weight and promises."""
        local = node_local
        self.register(
            plugin,
            tier,
            Scorer(
                fn,
                weight,
                local,
                fills and local,
                ahead if local else None,
                per_class and local,
                basis,
            ),
        )

    @property
    def node_local(self) -> bool:
        """True when every scorer is node-local."""
        return all(entry[2].node_local for entry in self._entries)

    @property
    def per_class(self) -> bool:
        """True when every scorer scores a node per task class (see ``Scorer``)."""
        return all(entry[2].per_class for entry in self._entries)

    def basis(self) -> tuple[object, ...]:
        """What the scores stand on besides node usage and the task class: each scorer's
        plugin, weight, promises and ``basis()``. Equal bases (compared with ``==``, the
        objects of ``basis()`` with ``is`` unless they define equality) give equal scores."""
        return tuple(
            (plugin, tier, scorer.weight, scorer.per_class, scorer.basis and scorer.basis())
            for plugin, tier, scorer in self._entries
        )

    @property
    def fills(self) -> bool:
        """True when every scorer keeps the best node best as it fills (none: True)."""
        return all(entry[2].fills for entry in self._entries)

    def __call__(self, arg: Any, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        total = np.zeros(len(nodes), dtype=np.float64)
        for _, _, scorer in self._entries:
            total += scorer.weight * scorer.fn(arg, nodes)
        return total

    def ahead(self, arg: Any, node: int, count: int) -> NDArray[np.float64] | None:
        """The weighted sum ``node`` will score for ``arg`` once 1, 2, .. ``count`` more
        tasks of its class are placed there, bit for bit what ``__call__`` will give
        then; None when a scorer cannot tell (or none promises to)."""
        total = np.zeros(count, dtype=np.float64)
        for _, _, scorer in self._entries:
            if scorer.ahead is None:
                return None
            scores = scorer.ahead(arg, node, count)
            if scores is None:
                return None
            total += scorer.weight * scores
        return total


class FirstPoint(_Point[Callable[P, R | None]], Generic[P, R]):
    """Plugins in tier order; the first answer that is not None is the answer (none: None)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R | None:
        for _, _, fn in self._entries:
            answer = fn(*args, **kwargs)
            if answer is not None:
                return answer
        return None


class EventPoint(_Point[Callable[[A], None]]):
    """Every handler is told, in registration order."""

    def __call__(self, arg: A) -> None:
        for _, _, fn in self._entries:
            fn(arg)


@dataclass(slots=True)
class Points:
    """Every extension point of a session, each with its combining rule."""

    job_order: OrderPoint[JobInfo] = field(default_factory=lambda: OrderPoint("job_order"))
    queue_order: OrderPoint[QueueInfo] = field(default_factory=lambda: OrderPoint("queue_order"))
    user_order: OrderPoint[tuple[str, str]] = field(
        default_factory=lambda: OrderPoint("user_order")
    )
    task_order: OrderPoint[TaskInfo] = field(default_factory=lambda: OrderPoint("task_order"))
    victim_order: OrderPoint[TaskInfo] = field(default_factory=lambda: OrderPoint("victim_order"))
    job_valid: CheckPoint[JobInfo] = field(default_factory=lambda: CheckPoint("job_valid"))
    job_ready: AllPoint[JobInfo] = field(default_factory=lambda: AllPoint("job_ready"))
    job_pipelined: AllPoint[JobInfo] = field(default_factory=lambda: AllPoint("job_pipelined"))
    job_enqueueable: VotePoint[JobInfo] = field(
        default_factory=lambda: VotePoint("job_enqueueable")
    )
    job_starving: AnyPoint[JobInfo] = field(default_factory=lambda: AnyPoint("job_starving"))
    overused: AnyPoint[QueueInfo] = field(default_factory=lambda: AnyPoint("overused"))
    allocatable: CheckPoint[TaskInfo] = field(default_factory=lambda: CheckPoint("allocatable"))
    preemptable: VictimPoint[TaskInfo, TaskInfo] = field(
        default_factory=lambda: VictimPoint("preemptable")
    )
    reclaimable: VictimPoint[TaskInfo, TaskInfo] = field(
        default_factory=lambda: VictimPoint("reclaimable")
    )
    predicate: MaskPoint[RoleInfo] = field(default_factory=lambda: MaskPoint("predicate"))
    node_score: ScorePoint = field(default_factory=lambda: ScorePoint("node_score"))
    gpu_select: FirstPoint[[TaskInfo, int], tuple[int, ...]] = field(
        default_factory=lambda: FirstPoint("gpu_select")
    )
    confinement: FirstPoint[[JobInfo], Confinement] = field(
        default_factory=lambda: FirstPoint("confinement")
    )
    #: the GPU types a job's GPU tasks should go to, best first (placement tries those
    #: alone, in that order, for a job not yet on a type); the first plugin with an
    #: answer decides, and None from all leaves the type to placement (best fit)
    gpu_types: FirstPoint[[JobInfo], tuple[str, ...]] = field(
        default_factory=lambda: FirstPoint("gpu_types")
    )
    #: the size each elastic job should have now, by job name (the ``elastic`` action
    #: grows and shrinks jobs towards it); the first plugin with an answer decides
    elastic_targets: FirstPoint[[], Mapping[str, int]] = field(
        default_factory=lambda: FirstPoint("elastic_targets")
    )
    on_allocate: EventPoint[TaskInfo] = field(default_factory=lambda: EventPoint("on_allocate"))
    on_deallocate: EventPoint[TaskInfo] = field(default_factory=lambda: EventPoint("on_deallocate"))


#: Names of every extension point, in ``Points``' field order: a plugin provides a point
#: by defining a method of its name.
POINT_NAMES = tuple(point.name for point in fields(Points))
#: The same names as a set; a plugin's ``disable`` list must use these.
EXTENSION_POINTS = frozenset(POINT_NAMES)
