"""What plugins and actions are, and how a plugin joins a session's extension points."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.extension import EXTENSION_POINTS, POINT_NAMES, Vote

if TYPE_CHECKING:
    from phalanx.engine.framework.confinement import Confinement
    from phalanx.engine.framework.session import Session
    from phalanx.engine.snapshot import JobInfo, QueueInfo, RoleInfo, TaskInfo


S = TypeVar("S")


class _Configurable:
    """Validated ``args`` from the config: unknown names and non-numbers are refused by name."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    accepted_args: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args: Mapping[str, Any] = dict(args or {})
        unknown = set(self.args) - self.accepted_args
        if unknown:
            accepted = ", ".join(sorted(self.accepted_args)) or "none"
            raise PluginError(
                f"{self.kind} {self.name!r} does not take {', '.join(sorted(unknown))}; "
                f"it accepts: {accepted}"
            )

    def number(self, key: str, default: float, *, minimum: float = 0.0) -> float:
        """A numeric arg of at least ``minimum``, refused with a clear message otherwise."""
        value = self.args.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise PluginError(
                f"{self.kind} {self.name!r}: arg {key!r} must be a number >= {minimum:g}, got {value!r}"
            )
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        """A true/false arg, refused with a clear message otherwise."""
        value = self.args.get(key, default)
        if not isinstance(value, bool):
            raise PluginError(
                f"{self.kind} {self.name!r}: arg {key!r} must be true or false, got {value!r}"
            )
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ScorePromises:
    """What a plugin's ``node_score`` promises (see ``Scorer``): ``node_local``, ``fills``
    and ``per_class`` (with ``score_basis`` when the plugin defines it) let placement
    re-score less; a false promise makes placement worse, never unsafe."""

    node_local: bool = True
    fills: bool = False
    per_class: bool = False


class Plugin(_Configurable, Generic[S]):
    """A noun: provides the extension points named by the methods its class defines.

    A subclass sets ``name`` (and ``accepted_args``), builds its per-session state in
    ``open`` and defines a method for each point it provides, named after the point
    (``Points``) and taking that state first: ``job_order(self, state, job)``,
    ``node_score(self, state, task, nodes)`` ... The points a class provides are found
    once, when the class is made (``provides``); each session they are registered in tier
    order, without the points the config disables for the plugin and those ``skipped``
    names for the session. One instance serves many sessions: per-session state lives in
    what ``open`` returns, never on ``self``.

    Options of a point are declared on the class: ``node_score`` is weighted by
    ``weight`` (arg ``weight`` when accepted, else ``default_weight``) and makes the
    ``promises`` declared; ``score_ahead`` and ``score_basis``, when defined, are its
    look-ahead and basis; ``judges_each`` says ``preemptable`` and ``reclaimable`` judge
    every candidate on its own.
    """

    kind = "plugin"
    default_weight: ClassVar[float] = 1.0
    promises: ClassVar[ScorePromises] = ScorePromises()
    judges_each: ClassVar[bool] = False
    #: Its ``job_order`` is a place in line only: no point of any plugin (its own
    #: included) judges a job by it, so work that failed for one job fails alike for
    #: another of the same shape whatever their places (eviction's memo relies on it).
    in_line_only: ClassVar[bool] = False
    #: The extension points this class provides, in ``Points`` order (found once per class).
    provides: ClassVar[tuple[str, ...]] = ()
    #: Whether the class defines ``score_ahead`` and ``score_basis``.
    looks_ahead: ClassVar[bool] = False
    has_basis: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.provides = tuple(point for point in POINT_NAMES if _defines(cls, point))
        cls.looks_ahead = _defines(cls, "score_ahead")
        cls.has_basis = _defines(cls, "score_basis")
        if (cls.looks_ahead or cls.has_basis) and "node_score" not in cls.provides:
            raise PluginError(
                f"{cls.__qualname__} defines score_ahead or score_basis without node_score"
            )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.weight = (
            self.number("weight", self.default_weight)
            if "weight" in self.accepted_args
            else self.default_weight
        )

    def open(self, session: Session) -> S:
        """This session's state, handed to every point method; called once per session,
        in tier order, before the points are registered."""
        raise NotImplementedError

    def skipped(self, state: S) -> Collection[str]:
        """Points of ``provides`` this plugin does without in the session of ``state``
        (they cost nothing there); none unless overridden."""
        return ()

    # -- the extension points: a subclass defines those it provides. Declared here, typed,
    # so mypy checks every definition against its point; these are never registered.

    def job_order(self, state: S, job: JobInfo) -> Any:
        """Smaller key first. It may change within a session only when a task moves or
        enqueue admits a job: the session keeps each job's key between those
        (``Session.job_key``)."""
        raise NotImplementedError

    def user_order(self, state: S, user: tuple[str, str]) -> Any:
        """Smaller key first, among the users (queue name, user) of one queue."""
        raise NotImplementedError

    def queue_order(self, state: S, queue: QueueInfo) -> Any:
        """Smaller key first."""
        raise NotImplementedError

    def task_order(self, state: S, task: TaskInfo) -> Any:
        """Smaller key first."""
        raise NotImplementedError

    def victim_order(self, state: S, task: TaskInfo) -> Any:
        """Smaller key is evicted first. The key may depend on what the session opened
        with and on the task's own job only: it is kept until a task of that job moves."""
        raise NotImplementedError

    def gpu_types(self, state: S, job: JobInfo) -> tuple[str, ...] | None:
        """The GPU types (``phalanx.io/gpu-model``) the job's GPU tasks should go to,
        best first; None leaves the choice to later plugins, then to placement."""
        raise NotImplementedError

    def elastic_targets(self, state: S) -> Mapping[str, int] | None:
        """The size each elastic job (by name) should have now; None: no opinion. Asked
        by the ``elastic`` action after the other actions ran; jobs not named keep their
        size."""
        raise NotImplementedError

    def job_valid(self, state: S, job: JobInfo) -> str | None:
        """None when the job could ever run, else why not."""
        raise NotImplementedError

    def job_ready(self, state: S, job: JobInfo) -> bool:
        """True when the job's allocations may be dispatched."""
        raise NotImplementedError

    def job_pipelined(self, state: S, job: JobInfo) -> bool:
        """True when the job's allocations plus pipelined tasks suffice to keep them."""
        raise NotImplementedError

    def job_enqueueable(self, state: S, job: JobInfo) -> Vote:
        """Permit, abstain or reject admission of a pending job."""
        raise NotImplementedError

    def job_starving(self, state: S, job: JobInfo) -> bool:
        """True when the job has waited too long and deserves a reservation."""
        raise NotImplementedError

    def overused(self, state: S, queue: QueueInfo) -> bool:
        """True when the queue should get nothing more in this session."""
        raise NotImplementedError

    def allocatable(self, state: S, task: TaskInfo) -> str | None:
        """None when the task's queue may take the task, else why not."""
        raise NotImplementedError

    def preemptable(
        self, state: S, preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> Sequence[TaskInfo]:
        """Of the candidates, the victims this plugin allows the preemptor to evict, in
        the order offered. They are offered in victim order, unless every plugin
        ``judges_each``: it judges every candidate on its own, whatever the others and
        their order."""
        raise NotImplementedError

    def reclaimable(
        self, state: S, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> Sequence[TaskInfo]:
        """Of the candidates, the victims this plugin allows the reclaimer to evict (as
        ``preemptable``)."""
        raise NotImplementedError

    def predicate(self, state: S, role: RoleInfo) -> NDArray[np.bool_]:
        """A mask over every node: where tasks of this role may go (static for a session)."""
        raise NotImplementedError

    def node_score(self, state: S, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """Scores (0..100) of candidate nodes for a task; higher is better."""
        raise NotImplementedError

    def score_ahead(
        self, state: S, task: TaskInfo, node: int, count: int
    ) -> NDArray[np.float64] | None:
        """``node_score``'s look-ahead: the node's scores once 1, 2, .. ``count`` more tasks
        of the task's class are placed there, or None when it cannot tell (see ``Scorer``)."""
        raise NotImplementedError

    def score_basis(self, state: S) -> object:
        """What ``node_score`` stands on besides node usage and the task class, for a
        ``per_class`` promise (see ``Scorer``)."""
        raise NotImplementedError

    def gpu_select(self, state: S, task: TaskInfo, node: int) -> tuple[int, ...] | None:
        """Which cards of node (index) a task allocated there gets; None leaves the choice
        to later plugins. The answer must serve the task's card demand."""
        raise NotImplementedError

    def confinement(self, state: S, job: JobInfo) -> Confinement | None:
        """How a job's gang is confined (node masks to try in order); None leaves the
        job to later plugins, and a job no plugin confines is placed anywhere."""
        raise NotImplementedError

    def on_allocate(self, state: S, task: TaskInfo) -> None:
        """Told after a task is allocated or pipelined (and after an evict is discarded)."""
        raise NotImplementedError

    def on_deallocate(self, state: S, task: TaskInfo) -> None:
        """Told after a task is evicted (and after an allocate is discarded)."""
        raise NotImplementedError


def _defines(cls: type, name: str) -> bool:
    return getattr(cls, name) is not getattr(Plugin, name)


def join(
    session: Session, plugin: Plugin[Any], name: str, tier: int, disabled: frozenset[str]
) -> None:
    """Open ``plugin`` for ``session`` and register, as ``name`` of ``tier``, each point
    its class provides but for the ``disabled`` ones and those it skips this session."""
    unknown = disabled - EXTENSION_POINTS
    if unknown:
        raise PluginError(
            f"plugin {name!r} disables unknown extension points {sorted(unknown)}; "
            f"known: {', '.join(sorted(EXTENSION_POINTS))}"
        )
    cls = type(plugin)
    state = plugin.open(session)
    skipped = plugin.skipped(state)
    points = session.points
    for point in cls.provides:
        if point in disabled or point in skipped:
            continue
        fn = partial(getattr(cls, point), plugin, state)
        if point == "node_score":
            promises = cls.promises
            points.node_score.add(
                name,
                tier,
                fn,
                weight=plugin.weight,
                node_local=promises.node_local,
                fills=promises.fills,
                ahead=partial(cls.score_ahead, plugin, state) if cls.looks_ahead else None,
                per_class=promises.per_class,
                basis=partial(cls.score_basis, plugin, state) if cls.has_basis else None,
            )
        elif point in ("preemptable", "reclaimable"):
            getattr(points, point).add(name, tier, fn, each=cls.judges_each)
        elif point == "job_order" and cls.in_line_only:
            points.job_order.register_in_line_only(name, tier, fn)
        else:
            getattr(points, point).register(name, tier, fn)


class Action(_Configurable):
    """A verb: one step of the session. Subclasses set ``name`` and override ``execute``.

    One instance may serve many sessions: keep no session state on ``self`` (what must
    outlive a session belongs to the snapshot it is about: see ``enqueue``'s refusals,
    kept per snapshot and epoch).
    """

    kind = "action"

    def open(self, session: Session) -> None:
        """Prepare before any action runs (for example plan reservations)."""

    def execute(self, session: Session) -> None:
        """Do this action's work on the session."""
        raise NotImplementedError
