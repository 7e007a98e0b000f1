"""The ``Queue`` document: one node of the queue tree with its quotas.

A validated ``QueueDocument`` always converts to a domain ``Queue``; its guarantee
and deserved share never exceed its capability on any resource, and each cell type
appears once in its ``cells``; a budget names at least one amount; an ``idleGpus``
threshold is a share of utilisation within 0..100% and its window is at least a minute.
Its weight, priority, starvation threshold and quantities are within the bounds of
``phalanx.spec.limits``.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Self

from pydantic import Field, PlainSerializer, PlainValidator, model_validator

from phalanx.domain.cells import CellGuarantee
from phalanx.domain.queue import (
    ROOT_QUEUE,
    Budget,
    IdleAction,
    IdlePolicy,
    Queue,
    UserLimits,
    WhenSpent,
)
from phalanx.domain.resources import Resources
from phalanx.spec.common import (
    API_VERSION,
    JobDuration,
    Metadata,
    Name,
    Priority,
    SpecModel,
    UserName,
    located,
)
from phalanx.spec.limits import MAX_WEIGHT, MIN_WEIGHT
from phalanx.spec.quantity import ResourceMap, resources_of


class CellGuaranteeSpec(SpecModel):
    """One entry of ``cells``: ``count`` whole cells of ``type`` (a Cluster cell type)."""

    type: Name
    """A cell type of the Cluster (its cellTypes, or one derived from a GPU topology)."""
    count: Annotated[int, Field(ge=1, le=1_000_000)]
    """How many whole cells of that type the queue is guaranteed."""


#: Most jobs a per-user limit may name: far beyond any queue's real limit.
MAX_JOBS_LIMIT = 1_000_000
#: Longest budget period, in seconds: the usage book keeps closed runs by the hour for
#: 31 days (``engine.snapshot.usage.KEEP_HOURS``), and periods are whole hours.
MAX_BUDGET_PERIOD = 31 * 86_400.0


class UserLimitsSpec(SpecModel):
    """``limits`` (each user of the queue) or one entry of ``userLimits``: what one user
    may have at once in this queue. A field left out is not limited (in ``userLimits``:
    the queue's ``limits`` apply to it)."""

    running_jobs: Annotated[int, Field(ge=0, le=MAX_JOBS_LIMIT)] | None = None
    """Most of the user's jobs running (holding nodes) at once (Slurm's MaxJobsPerUser);
    more wait, with the reason."""
    waiting_jobs: Annotated[int, Field(ge=0, le=MAX_JOBS_LIMIT)] | None = None
    """Most of the user's jobs submitted and not yet running (Slurm's
    MaxSubmitJobsPerUser); more are refused at submit (the control plane's check: the
    simulator has no submit to refuse)."""
    resources: ResourceMap | None = None
    """Most the user's jobs hold at once, per resource named (Slurm's MaxTRESPerUser):
    ``{gpu: 8}``; a job that would pass it waits, with the reason."""

    def to_domain(self) -> UserLimits:
        """The domain ``UserLimits`` in canonical units."""
        return UserLimits(
            running_jobs=self.running_jobs,
            waiting_jobs=self.waiting_jobs,
            resources=_optional(self.resources),
        )


class BudgetSpec(SpecModel):
    """``budget``: resource-hours the queue's users may use per period (Slurm's
    GrpTRESMins, in hours): ``{period: 7d, perUser: {gpu: 100}, queue: {gpu: 1000},
    whenSpent: hold}``. What a user used counts runs that ended in the period and tasks
    running now."""

    period: JobDuration
    """How often the budget restarts, in whole hours up to 31d: periods are aligned to t=0
    (a 1d period restarts at UTC midnight)."""
    per_user: ResourceMap | None = None
    """Resource-hours each user may use per period: ``gpu: 100`` is 100 GPU-hours, ``cpu``
    in core-hours, ``memory`` in byte-hours written as quantities (``512Gi``: 512 GiB-hours)."""
    queue: ResourceMap | None = None
    """Resource-hours all the queue's users may use together per period, as perUser."""
    when_spent: Literal["hold", "lowerPriority"] = "hold"
    """What happens to new jobs once a budget is spent: ``hold`` (they wait, with the
    reason, until the next period) or ``lowerPriority`` (they go after every job within
    budget, and such jobs may preempt them)."""

    @model_validator(mode="after")
    def _whole_hours(self) -> Self:
        hours = self.period / 3600
        if hours != int(hours) or self.period > MAX_BUDGET_PERIOD:
            raise located(
                f"a budget period of {self.period:g} s is not a whole number of hours up to 31d",
                "give whole hours, at most 31d: 1h, 24h, 1d, 7d, 30d",
                at=("period",),
            )
        return self

    @model_validator(mode="after")
    def _names_an_amount(self) -> Self:
        if not self.per_user and not self.queue:
            raise located(
                "a budget without amounts limits nothing",
                "give perUser or queue resource-hours, e.g. perUser: {gpu: 100}, or drop budget",
                at=("perUser",),
            )
        return self

    def to_domain(self) -> Budget:
        """The domain ``Budget`` in canonical units (times hours)."""
        return Budget(
            period=self.period,
            per_user=_optional(self.per_user),
            queue=_optional(self.queue),
            when_spent=WhenSpent(self.when_spent),
        )


#: Shortest ``idleGpus.window``, in seconds: nodes read their GPUs every few seconds, and
#: a shorter window would judge a job on a handful of readings (a data loader's pause).
MIN_IDLE_WINDOW = 60.0
_PERCENT_FIX = "write a percent such as 5% (or a fraction of 1 such as 0.05)"


def _percent(value: object) -> float:
    """A share of utilisation in percent: ``"5%"`` or a fraction of 1 (``0.05``)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        text = value.strip().removesuffix("%").strip()
        try:
            percent = float(text)
        except ValueError:
            raise located(f"{value!r:.40} is not a percent", _PERCENT_FIX) from None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if value > 1:
            raise located(
                f"{value!r} is a fraction of 1 above 1 ({100 * value:g}%)",
                f"write {value:g}% for {value:g} percent, or a fraction within 0..1",
            )
        percent = round(float(value) * 100.0, 9)  # 0.05 -> 5, not 5.000000000000001
    else:
        raise located(f"{value!r:.40} is not a share of utilisation", _PERCENT_FIX)
    if not math.isfinite(percent) or not 0.0 <= percent <= 100.0:
        raise located(f"{value!r:.40} is not within 0..100%", _PERCENT_FIX)
    return percent


#: A share of utilisation: ``"5%"`` or ``0.05``, validated and held in percent (0..100),
#: written back as ``"5%"`` (a bare 5.0 would read back as 500%).
Percent = Annotated[
    float,
    PlainValidator(_percent, json_schema_input_type=str | float),
    PlainSerializer(lambda value: f"{value:g}%", return_type=str),
]


class IdleGpusSpec(SpecModel):
    """``idleGpus``: what becomes of a job whose GPUs sit idle, ``{threshold: 5%, window:
    30m, action: stop}``. A job is idle once every reading of its GPUs (each node's
    busiest task, every few seconds) stays below the threshold for the whole window; it
    then gets an event and an idle mark, and with ``stop`` it is stopped (Failed, not
    retried), or, if elastic and above its minimum, shrunk to its minimum (and stopped
    if it stays idle another window). A queue without ``idleGpus`` takes its nearest
    ancestor's; ``threshold: 0%`` exempts a queue from its parent's."""

    threshold: Percent = Field(default="5%", validate_default=True)
    """Utilisation below which a job's GPUs count as idle: a percent (5%) or a fraction
    of 1 (0.05); 0% judges no job idle."""
    window: JobDuration = Field(default="30m", validate_default=True)
    """How long every reading must stay below the threshold before the job is idle (at
    least 1m)."""
    action: Literal["mark", "stop"] = "mark"
    """What an idle job gets: ``mark`` (an event and a visible mark; it runs on) or
    ``stop`` (also stopped, Failed and not retried; an elastic job above its minimum is
    shrunk to it first)."""

    @model_validator(mode="after")
    def _long_enough(self) -> Self:
        if self.window < MIN_IDLE_WINDOW:
            raise located(
                f"a window of {self.window:g} s would judge a job on a handful of readings",
                "give at least 1m (30m is usual)",
                at=("window",),
            )
        return self

    def to_domain(self, queue: str = "") -> IdlePolicy:
        """The domain ``IdlePolicy`` of queue ``queue``: percent and seconds."""
        return IdlePolicy(
            threshold=self.threshold,
            window=self.window,
            action=IdleAction(self.action),
            queue=queue,
        )


class QueueSpec(SpecModel):
    """``spec`` of a Queue; fields mirror Volcano's Queue.

    ``cells`` makes the queue a virtual cluster (HiveD's, for the hived plugin): the
    whole cells it is guaranteed, by type, such as ``[{type: dgx1-v100-node, count:
    2}]`` for two 8-GPU NVLink nodes. Its jobs' GPUs go inside those cells, bound to
    physical cells as they are needed; work of others found there is evicted for them.
    Types are the Cluster's ``cellTypes`` or those derived from its GPU topologies
    (``<preset>-gpu``, ``-nvlink``, ``-pcie``, ``-socket``, ``-node``).
    """

    parent: Name = ROOT_QUEUE
    """The parent queue in the tree; omitted: a child of the root. Jobs go to leaf queues."""
    weight: Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)] = 1.0
    """The queue's share, relative to its siblings', of what is left after guarantees (its
    deserved share when deserved is omitted)."""
    guarantee: ResourceMap = Field(default_factory=dict)
    """Resources that are never lent away: reclaim gets them back for this queue's jobs
    whenever they wait."""
    deserved: ResourceMap | None = None
    """The fair share under contention; omitted: computed from weight. Above it, a queue's
    jobs run on borrowed capacity that reclaim may take back."""
    capability: ResourceMap | None = None
    """The hard cap on what the queue's jobs hold at once; omitted: no cap (within the
    parent's). A capability above the guarantee is how a queue borrows idle capacity."""
    reclaimable: bool = True
    """Whether other queues may reclaim what this queue holds above its deserved share."""
    overcommit: bool = False
    """Let the queue's work run beyond its quota on idle capacity; that excess is the first
    to be reclaimed."""
    priority: Priority = 0
    """Orders queues for allocation, reclaim and preemption (higher first)."""
    starvation_threshold: JobDuration | None = None
    """How long a job may wait before it gets a reservation (backfill keeps room for it); a
    job's own value overrides it."""
    submitters: list[UserName] | None = None
    """Who may submit here (the control plane's access list); omitted: every user. Admins
    always may."""
    cells: list[CellGuaranteeSpec] = Field(default_factory=list)
    """Whole cells the queue is guaranteed, making it a virtual cluster (the hived plugin)."""
    limits: UserLimitsSpec = UserLimitsSpec()
    """What each user of the queue may have at once (running jobs, waiting jobs,
    resources held), unless userLimits says otherwise for that user."""
    user_limits: dict[UserName, UserLimitsSpec] = Field(default_factory=dict)
    """Limits of named users, each replacing the fields it sets of limits (a resources
    map replaces the whole map): ``{alice: {runningJobs: 8}}``. A user who never submits
    here is fine."""
    budget: BudgetSpec | None = None
    """Resource-hours the queue's users may use per period, and what happens once spent."""
    idle_gpus: IdleGpusSpec | None = None
    """What becomes of a job whose GPUs sit below a utilisation threshold for a window:
    marked, or stopped (an elastic one shrunk to its minimum first). Omitted: the
    nearest ancestor's applies, else none."""

    @model_validator(mode="after")
    def _cell_types_once(self) -> Self:
        seen: set[str] = set()
        for i, entry in enumerate(self.cells):
            if entry.type in seen:
                raise located(
                    f"cell type {entry.type!r} is listed twice",
                    "add the counts up in one entry",
                    at=("cells", i, "type"),
                )
            seen.add(entry.type)
        return self

    @model_validator(mode="after")
    def _within_capability(self) -> Self:
        if self.capability is None:
            return self
        cap = resources_of(self.capability)
        for field, amounts in (("guarantee", self.guarantee), ("deserved", self.deserved or {})):
            for name, amount in resources_of(amounts).items():
                if name in self.capability and amount > cap[name]:
                    raise located(
                        f"{amounts[name]} exceeds capability {self.capability[name]}",
                        f"lower {field}.{name} or raise capability.{name}",
                        at=(field, name),
                    )
        return self


class QueueDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Queue``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Queue"] = "Queue"
    """Always Queue."""
    metadata: Metadata
    """The queue's name (not root), labels and annotations."""
    spec: QueueSpec = QueueSpec()
    """The queue's place in the tree and its quotas."""

    @model_validator(mode="after")
    def _not_root_nor_own_parent(self) -> Self:
        name = self.metadata.name
        if name == ROOT_QUEUE:
            raise located(
                f"{ROOT_QUEUE!r} is the implicit root of the queue tree",
                "choose another name",
                at=("metadata", "name"),
            )
        if self.spec.parent == name:
            raise located(
                "a queue cannot be its own parent",
                f"name another queue or omit parent (default {ROOT_QUEUE!r})",
                at=("spec", "parent"),
            )
        return self

    def to_domain(self) -> Queue:
        """The domain ``Queue`` in canonical units."""
        spec, name = self.spec, self.metadata.name
        return Queue(
            name=name,
            parent=spec.parent,
            weight=spec.weight,
            guarantee=resources_of(spec.guarantee),
            deserved=_optional(spec.deserved),
            capability=_optional(spec.capability),
            reclaimable=spec.reclaimable,
            overcommit=spec.overcommit,
            priority=spec.priority,
            starvation_threshold=spec.starvation_threshold,
            cells=tuple(CellGuarantee(type=c.type, count=c.count) for c in spec.cells),
            limits=spec.limits.to_domain(),
            user_limits=tuple(
                (user, limits.to_domain()) for user, limits in sorted(spec.user_limits.items())
            ),
            budget=None if spec.budget is None else spec.budget.to_domain(),
            idle_gpus=None if spec.idle_gpus is None else spec.idle_gpus.to_domain(name),
        )


def _optional(amounts: ResourceMap | None) -> Resources | None:
    return None if amounts is None else resources_of(amounts)


def limits_summary(spec: QueueSpec) -> list[tuple[str, str]]:
    """A queue's per-user limits, budget and own idle policy for people, as (label, text)
    lines in the words of the document: ``("Limits", "runningJobs 4, waitingJobs 20,
    resources gpu 8")``, ``("Limits of alice", ...)``, ``("Budget", "per 7d: perUser gpu
    100, queue gpu 1000 (resource-hours); when spent: hold")``, ``("Idle GPUs", "below 5%
    for 30m: stop")``. None of them for a queue without any."""
    lines: list[tuple[str, str]] = []
    said = _said_limits(spec.limits)
    if said:
        lines.append(("Limits", f"{said} (each user)"))
    for user, own in sorted(spec.user_limits.items()):
        lines.append((f"Limits of {user}", _said_limits(own) or "as the queue's"))
    budget = spec.budget
    if budget is not None:
        amounts = [
            f"{field} {_said_map(given)}"
            for field, given in (("perUser", budget.per_user), ("queue", budget.queue))
            if given
        ]
        lines.append(
            (
                "Budget",
                f"per {_said_period(budget.period)}: {', '.join(amounts)} (resource-hours); "
                f"when spent: {budget.when_spent}",
            )
        )
    idle = spec.idle_gpus
    if idle is not None:
        lines.append(("Idle GPUs", f"{idle.to_domain().said()}: {idle.action}"))
    return lines


def _said_limits(limits: UserLimitsSpec) -> str:
    parts = [
        f"{name} {value}"
        for name, value in (
            ("runningJobs", limits.running_jobs),
            ("waitingJobs", limits.waiting_jobs),
        )
        if value is not None
    ]
    if limits.resources is not None:
        parts.append(f"resources {_said_map(limits.resources)}")
    return ", ".join(parts)


def _said_map(amounts: ResourceMap) -> str:
    return " ".join(f"{name}={value}" for name, value in amounts.items()) or "none"


def _said_period(seconds: float) -> str:
    days, hours = divmod(int(seconds // 3600), 24)
    return f"{days}d" if not hours else (f"{days}d{hours}h" if days else f"{hours}h")
