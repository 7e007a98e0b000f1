"""What plugins and actions are, and the per-plugin registration facade."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.extension import EXTENSION_POINTS, AheadFn, ScoreFn, Vote

if TYPE_CHECKING:
    from phalanx.engine.framework.domains import DomainRule
    from phalanx.engine.framework.session import Session
    from phalanx.engine.snapshot import JobInfo, QueueInfo, RoleInfo, TaskInfo


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


class Plugin(_Configurable):
    """A noun: registers callbacks on extension points when a session opens.

    Subclasses set ``name`` (and ``accepted_args``) and override ``open``. One instance
    may serve many sessions: keep per-session state in what ``open`` registers (its
    closures), never on ``self``.
    """

    kind = "plugin"

    def open(self, session: Session, hooks: Hooks) -> None:
        """Register callbacks; called once per session, in tier order."""


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


class Hooks:
    """Registration facade for one plugin: knows its name and tier, skips disabled points."""

    def __init__(self, session: Session, plugin: str, tier: int, disabled: frozenset[str]) -> None:
        unknown = disabled - EXTENSION_POINTS
        if unknown:
            raise PluginError(
                f"plugin {plugin!r} disables unknown extension points {sorted(unknown)}; "
                f"known: {', '.join(sorted(EXTENSION_POINTS))}"
            )
        self._points = session.points
        self._plugin = plugin
        self._tier = tier
        self._disabled = disabled

    def _on(self, point: str) -> bool:
        return point not in self._disabled

    def job_order(self, fn: Callable[[JobInfo], Any]) -> None:
        """Smaller key first."""
        if self._on("job_order"):
            self._points.job_order.register(self._plugin, self._tier, fn)

    def user_order(self, fn: Callable[[tuple[str, str]], Any]) -> None:
        """Smaller key first, among the users (queue name, user) of one queue."""
        if self._on("user_order"):
            self._points.user_order.register(self._plugin, self._tier, fn)

    def queue_order(self, fn: Callable[[QueueInfo], Any]) -> None:
        """Smaller key first."""
        if self._on("queue_order"):
            self._points.queue_order.register(self._plugin, self._tier, fn)

    def task_order(self, fn: Callable[[TaskInfo], Any]) -> None:
        """Smaller key first."""
        if self._on("task_order"):
            self._points.task_order.register(self._plugin, self._tier, fn)

    def victim_order(self, fn: Callable[[TaskInfo], Any]) -> None:
        """Smaller key is evicted first. The key may depend on what the session opened
        with and on the task's own job only: it is kept until a task of that job moves."""
        if self._on("victim_order"):
            self._points.victim_order.register(self._plugin, self._tier, fn)

    def elastic_targets(self, fn: Callable[[], Mapping[str, int] | None]) -> None:
        """The size each elastic job (by name) should have now; None: no opinion. Called
        by the ``elastic`` action after the other actions ran; jobs not named keep the
        action's own rule."""
        if self._on("elastic_targets"):
            self._points.elastic_targets.register(self._plugin, self._tier, fn)

    def job_valid(self, fn: Callable[[JobInfo], str | None]) -> None:
        """None when the job could ever run, else why not."""
        if self._on("job_valid"):
            self._points.job_valid.register(self._plugin, self._tier, fn)

    def job_ready(self, fn: Callable[[JobInfo], bool]) -> None:
        """True when the job's allocations may be dispatched."""
        if self._on("job_ready"):
            self._points.job_ready.register(self._plugin, self._tier, fn)

    def job_pipelined(self, fn: Callable[[JobInfo], bool]) -> None:
        """True when the job's allocations plus pipelined tasks suffice to keep them."""
        if self._on("job_pipelined"):
            self._points.job_pipelined.register(self._plugin, self._tier, fn)

    def job_enqueueable(self, fn: Callable[[JobInfo], Vote]) -> None:
        """Permit, abstain or reject admission of a pending job."""
        if self._on("job_enqueueable"):
            self._points.job_enqueueable.register(self._plugin, self._tier, fn)

    def job_starving(self, fn: Callable[[JobInfo], bool]) -> None:
        """True when the job has waited too long and deserves a reservation."""
        if self._on("job_starving"):
            self._points.job_starving.register(self._plugin, self._tier, fn)

    def overused(self, fn: Callable[[QueueInfo], bool]) -> None:
        """True when the queue should get nothing more in this session."""
        if self._on("overused"):
            self._points.overused.register(self._plugin, self._tier, fn)

    def allocatable(self, fn: Callable[[TaskInfo], str | None]) -> None:
        """None when the task's queue may take the task, else why not."""
        if self._on("allocatable"):
            self._points.allocatable.register(self._plugin, self._tier, fn)

    def preemptable(
        self,
        fn: Callable[[TaskInfo, Sequence[TaskInfo]], Sequence[TaskInfo]],
        *,
        each: bool = False,
    ) -> None:
        """Of the candidates, the victims this plugin allows the preemptor to evict, in
        the order offered. They are offered in victim order, unless every plugin says
        ``each``: it judges every candidate on its own, whatever the others and their
        order."""
        if self._on("preemptable"):
            self._points.preemptable.add(self._plugin, self._tier, fn, each=each)

    def reclaimable(
        self,
        fn: Callable[[TaskInfo, Sequence[TaskInfo]], Sequence[TaskInfo]],
        *,
        each: bool = False,
    ) -> None:
        """Of the candidates, the victims this plugin allows the reclaimer to evict (as
        ``preemptable``)."""
        if self._on("reclaimable"):
            self._points.reclaimable.add(self._plugin, self._tier, fn, each=each)

    def predicate(self, fn: Callable[[RoleInfo], NDArray[np.bool_]]) -> None:
        """A mask over every node: where tasks of this role may go (static for a session)."""
        if self._on("predicate"):
            self._points.predicate.register(self._plugin, self._tier, fn)

    def node_score(
        self,
        fn: ScoreFn[TaskInfo],
        *,
        weight: float = 1.0,
        node_local: bool = True,
        fills: bool = False,
        ahead: AheadFn[TaskInfo] | None = None,
        per_class: bool = False,
        basis: Callable[[], object] | None = None,
    ) -> None:
        """Scores (0..100) of candidate nodes for a task; higher is better.

        ``node_local``, ``fills``, ``ahead`` and ``per_class`` (with its ``basis``) are
        promises (see ``Scorer``) that let placement re-score less; a false promise makes
        placement worse, never unsafe.
        """
        if self._on("node_score"):
            self._points.node_score.add(
                self._plugin,
                self._tier,
                fn,
                weight=weight,
                node_local=node_local,
                fills=fills,
                ahead=ahead,
                per_class=per_class,
                basis=basis,
            )

    def gpu_select(self, fn: Callable[[TaskInfo, int], tuple[int, ...] | None]) -> None:
        """Which cards of node (index) a task allocated there gets; None leaves the choice
        to later plugins. The answer must serve the task's card demand."""
        if self._on("gpu_select"):
            self._points.gpu_select.register(self._plugin, self._tier, fn)

    def domains(self, fn: Callable[[JobInfo], DomainRule | None]) -> None:
        """How a job's gang is confined to domains (ordered node masks); None leaves the
        job to later plugins, and a job no plugin confines is placed anywhere."""
        if self._on("domains"):
            self._points.domains.register(self._plugin, self._tier, fn)

    def on_allocate(self, fn: Callable[[TaskInfo], None]) -> None:
        """Told after a task is allocated or pipelined (and after an evict is discarded)."""
        if self._on("on_allocate"):
            self._points.on_allocate.register(self._plugin, self._tier, fn)

    def on_deallocate(self, fn: Callable[[TaskInfo], None]) -> None:
        """Told after a task is evicted (and after an allocate is discarded)."""
        if self._on("on_deallocate"):
            self._points.on_deallocate.register(self._plugin, self._tier, fn)
