"""goodput: the size each elastic job should have, chosen to maximise the cluster's
goodput as Pollux does (``elastic_targets``, read by the ``elastic`` action).

Every session it sizes the elastic jobs of the snapshot together:

- the GPUs to share: those of schedulable nodes, less what jobs that are not elastic
  hold (those are the other actions' business); jobs whose replicas take other than
  one GPU keep their size (Pollux's model sizes one-GPU replicas);
- each job's speedup curve from its reports (``models``): fitted throughput and
  gradient statistics, linear before it has reported;
- what each job may have: 0 while it waits (it stays waiting), else 1 up to its
  role's ``max_replicas`` and, as Pollux bounds a job that is still learning, at most
  twice the most replicas it has reported a step on (``exploreFactor``), or, before
  it has reported one, the replicas its owner asked for (Pollux: 1, where a fresh job
  waits a session per doubling for sizes its owner already chose); a job that waits
  to start (allocate could not place it) and has measured nothing, no more than an
  equal share of the GPUs (its assumed linear speedup must not outbid what the others
  have measured of theirs; it grows once it has); a job that has run a whole
  ``interval`` without reporting anything grows as its linear speedup says (it may
  never report); a job rescaled less than its ``interval`` ago, or in a queue that is
  overused, keeps its size (a waiting job of such a queue stays waiting);
- a change costs: any size but the current one has its speedup multiplied by
  ``since / (since + cost)``, where ``since`` is the time since the job last changed
  size (or started, or arrived) and ``cost`` its ``Elastic.cost`` (Pollux's factor
  ``age / (age + 30 s)`` for a job that has not restarted yet): a job just rescaled
  pays dearly for another change, so nothing flaps;
- when the jobs outnumber the GPUs (each needs its ``min_replicas``), which of them run
  is decided first, by least attained service as Tiresias and Pollux's tie order do
  (``suspendAbove`` GPU-seconds, and ten times the job's rescale cost, two levels;
  within a level first come first served, but see below): a running job that has had at least that
  much is given 0 (the ``elastic`` action suspends it; it waits with its progress, as
  a checkpointed job does) for waiting jobs that have had less, and those waiting
  beyond the GPUs stay waiting. A running job is never suspended for one of its own
  level, so nothing flaps, but with ``remainingExponent`` > 0 the served level goes
  shortest remaining first (on one GPU; a job that does not say after those that do):
  one there is suspended only for a job with less left, whose lead only grows while
  it runs. The power mean is indifferent here (a job without GPUs weighs the same
  whichever it is), and serving the least served first is what keeps short jobs short
  under overload;
- with ``remainingExponent`` k > 0, each job's term in the power mean is weighted by
  ``(left / typical) ** -k``: ``left`` the seconds it still needs on an equal share
  (from the ``total_samples`` it reports, what it has done, and its goodput model),
  ``typical`` the geometric mean of that over the jobs that say (a job that does not
  weighs 1). A job near its end is given GPUs before one far from it, which lowers the
  mean completion time (shortest remaining first is optimal on one machine; with
  sublinear speedups the optimum shares, favouring the shortest: heSRPT, Berg et al.
  SIGMETRICS '20); the power mean still runs every job it has room for unless weights
  differ some hundredfold (a job without GPUs weighs ``weight / EPS``, a thousand times
  its term on an equal share; with k = 0.5 that takes a ten-thousandfold difference in
  what is left), so a long job is slowed, not stopped;
- then ``search`` (power mean p = -1 of the speedups) picks the sizes;
- on a cluster of several GPU types (``placement.gputypes``) each job is priced per
  (type, size) instead (``typed``: its goodput on each type, learnt there or projected
  from the type it ran on by one-GPU bootstrapping ratios, as Sia does), all of a job's
  types over one base, its goodput on an equal share of its slowest type; a job that
  holds GPUs keeps to its type (charged for a change of size as above), one that holds
  none may take any type its roles may use (uncharged: it pays its start whatever it is
  given); ``search_typed`` chooses type and size together, within each type's GPUs
  (``typed.type_pools``), and the ``gpu_types`` point sends each job given GPUs to its
  type before it is placed.

The answer names every elastic job it sized; the action grows and shrinks them towards
it. Args: ``exploreFactor`` (default 2; 0 turns the bound off), ``fairShare``
(true: speedups relative to an equal share of the GPUs, Pollux's normalisation;
false: relative to one GPU), ``suspendAbove`` (GPU-seconds; default 0: no job is
suspended), ``remainingExponent`` (default 0: every job weighs the same, as Pollux),
``powerMean`` (the power mean's p, below 0; default -1, Pollux's: a job left with little
weighs most; Sia's -0.5 weighs total goodput more), ``typedPowerMean``,
``typedRemainingExponent`` and ``typedSuspendAbove`` (the three on a cluster of several
GPU types; default ``powerMean``, ``remainingExponent`` and ``suspendAbove``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.domain.job import JobPhase, Role
from phalanx.domain.resources import GPU
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.placement.gputypes import (
    GpuTypeIndex,
    asks_gpus,
    gpu_type_index,
    pinned_type,
)
from phalanx.engine.plugins.goodput.models import Fits, remaining_seconds, speedups
from phalanx.engine.plugins.goodput.search import EPS, search, search_typed
from phalanx.engine.plugins.goodput.typed import TypePool, type_goodputs, type_pools
from phalanx.engine.snapshot import ON_NODE, JobInfo, Snapshot
from phalanx.engine.snapshot.units import ENGINE_UNITS

#: A job is suspended only once it has had this many times its rescale cost in service
#: (GPU-seconds against seconds), as well as ``suspendAbove``.
SUSPEND_COSTS = 10.0


@dataclass(slots=True)
class _State:
    """One session's: the session, the args that hold in it (the ``typed*`` ones on a
    cluster of several GPU types), and its plan once made (``_plan``) with the length of
    the session's log then (a plan is a function of the session's state, which only a
    committed operation changes)."""

    session: Session
    suspend_above: float
    remaining_exponent: float
    power: float
    plan: _Plan | None = None
    planned_at: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """Sizes of the elastic jobs sized, and on a cluster of several types the GPU types
    wished for each of those that hold none yet and are given GPUs, best first."""

    sizes: dict[str, int]
    types: dict[str, tuple[str, ...]]


class GoodputPlugin(Plugin[_State]):
    """Targets for elastic jobs that maximise the power mean of their speedups."""

    name = "goodput"
    accepted_args = frozenset(
        {
            "exploreFactor",
            "fairShare",
            "suspendAbove",
            "remainingExponent",
            "powerMean",
            "typedPowerMean",
            "typedRemainingExponent",
            "typedSuspendAbove",
        }
    )

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.explore = self.number("exploreFactor", 2.0)
        self.fair_share = self.flag("fairShare", True)
        self.suspend_above = self.number("suspendAbove", 0.0)
        self.remaining_exponent = self.number("remainingExponent", 0.0)
        self.power = self._power("powerMean", -1.0)
        self.typed_power = self._power("typedPowerMean", self.power)
        self.typed_remaining = self.number("typedRemainingExponent", self.remaining_exponent)
        self.typed_suspend = self.number("typedSuspendAbove", self.suspend_above)

    def _power(self, key: str, default: float) -> float:
        """A power mean's p: a number below 0."""
        power = self.number(key, default, minimum=-10.0)
        if power >= 0:
            raise PluginError(
                f"plugin 'goodput': arg {key!r} must be below 0 (-1: Pollux's, -0.5: "
                f"Sia's), got {power:g}"
            )
        return power

    def open(self, session: Session) -> _State:
        typed = session.kept.get(gpu_type_index, Lifetime.FIXED).several
        return _State(
            session=session,
            suspend_above=self.typed_suspend if typed else self.suspend_above,
            remaining_exponent=self.typed_remaining if typed else self.remaining_exponent,
            power=self.typed_power if typed else self.power,
        )

    def job_order(self, state: _State, job: JobInfo) -> int:
        """With ``suspendAbove``: elastic jobs that have had less service than that
        first (so allocate places the jobs the targets let run, not one just
        suspended); 0 for every other job."""
        if state.suspend_above <= 0 or job.spec.elastic_role() is None:
            return 0
        return _served_level(job, state.session.now, state.suspend_above)

    def gpu_types(self, state: _State, job: JobInfo) -> tuple[str, ...] | None:
        """On a cluster of several GPU types, the type this session's plan gives an
        elastic job that holds none yet (the plan is made at the first question and
        kept for the session's placements); None for any other job."""
        if job.spec.elastic_role() is None:
            return None
        if state.planned_at < 0:
            self._replan(state)
        return None if state.plan is None else state.plan.types.get(job.name)

    def elastic_targets(self, state: _State) -> Mapping[str, int] | None:
        if state.planned_at != len(state.session.log):  # placements moved since
            self._replan(state)
        return None if state.plan is None else state.plan.sizes

    def _replan(self, state: _State) -> None:
        state.plan = _targets(
            state.session,
            explore=self.explore,
            fair_share=self.fair_share,
            suspend_above=state.suspend_above,
            remaining_exponent=state.remaining_exponent,
            power=state.power,
        )
        state.planned_at = len(state.session.log)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Share:
    """The GPUs the elastic jobs share in a session."""

    capacity: int  # GPUs of schedulable nodes, less what jobs that are not elastic hold
    per_node: int  # GPUs of the largest schedulable node (at least 1)
    fair: int  # the GPUs speedups are relative to: an equal share, or 1


def _targets(
    session: Session,
    *,
    explore: float,
    fair_share: bool,
    suspend_above: float = 0.0,
    remaining_exponent: float = 0.0,
    power: float = -1.0,
) -> _Plan | None:
    """The size of each elastic job that is sized this session, by name, and on several
    GPU types the type of each given GPUs that holds none (see the module docstring);
    None when no elastic job is alive or the cluster has no GPUs."""
    snapshot = session.snapshot
    jobs = session.ranked(
        j for j in snapshot.elastic.values() if j.phase not in (JobPhase.SUCCEEDED, JobPhase.FAILED)
    )
    gpu = snapshot.dim.get("gpu")
    if not jobs or gpu is None:
        return None
    share = _share(snapshot, jobs, gpu, fair_share=fair_share)
    fits = session.kept.get(Fits, Lifetime.FIXED)
    shut: set[str] = set()
    if suspend_above > 0:
        by_left = remaining_exponent > 0
        shut = _shut_out(session, jobs, share.capacity, suspend_above, by_left=by_left)
    index = session.kept.get(gpu_type_index, Lifetime.FIXED)
    if index.several:
        return _typed_targets(
            session, jobs, share, fits, shut, index, explore, remaining_exponent, power
        )
    values, current, sized = _values(session, jobs, share, fits, shut, explore=explore, power=power)
    if remaining_exponent > 0:
        weights = _near_end_weights(jobs, fits, share.fair, share.per_node, remaining_exponent)
        values *= weights[:, None]
    chosen = search(values, current, share.capacity)
    sizes = {job.name: int(chosen[row]) for row, job in enumerate(jobs) if sized[row]}
    return _Plan(sizes=sizes, types={})


def _share(snapshot: Snapshot, jobs: list[JobInfo], gpu: int, *, fair_share: bool) -> _Share:
    """The GPUs ``jobs`` (the elastic ones) share: those of schedulable nodes less what
    the other jobs hold; ``fair_share``: speedups relative to an equal share of them."""
    unit = ENGINE_UNITS.get(GPU, 1.0)
    usable = snapshot.capacity[snapshot.schedulable, gpu] / unit
    per_node = max(1, int(usable.max(initial=1.0)))
    elastic_held = sum(float(j.allocated[gpu]) for j in jobs) / unit
    others = float(snapshot.used[:, gpu].sum()) / unit - elastic_held
    capacity = max(0, math.floor(float(usable.sum()) - others + 1e-9))
    fair = max(1, math.ceil(capacity / len(jobs))) if fair_share else 1
    return _Share(capacity=capacity, per_node=per_node, fair=fair)


def _values(
    session: Session,
    jobs: list[JobInfo],
    share: _Share,
    fits: Fits,
    shut: set[str],
    *,
    explore: float,
    power: float = -1.0,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_]]:
    """``search``'s input, a row per job: the values of giving it 0..capacity GPUs
    (inf where it may not have them; 0 at the one size a job in ``shut`` or keeping its
    size gets), and its current size; then which jobs are sized (the others keep their
    size and are left out of the answer)."""
    values = np.full((len(jobs), share.capacity + 1), np.inf)
    current = np.zeros(len(jobs), dtype=np.int64)
    sized = np.zeros(len(jobs), dtype=np.bool_)
    for row, job in enumerate(jobs):
        size, placed = _sizes(job)
        current[row] = min(placed, share.capacity)
        if job.name in shut:  # suspended, or left waiting: no GPUs this session
            sized[row] = True
            values[row, 0] = 0.0
            continue
        allowed = _allowed(session, job, size, placed, explore, share.capacity)
        if allowed is None:  # it keeps its size (growth still being placed too)
            if placed:
                current[row] = min(size, share.capacity)
            values[row, current[row]] = 0.0
            continue
        sized[row] = True
        _price(values[row], session, job, placed, allowed, fits, share, power)
    return values, current, sized


def _price(
    out: NDArray[np.float64],
    session: Session,
    job: JobInfo,
    placed: int,
    allowed: tuple[int, int],
    fits: Fits,
    share: _Share,
    power: float = -1.0,
) -> None:
    """Write into ``out`` (``job``'s row of ``search``'s values) the ``power``-th power
    (-1: the inverse) of its speedup at each size ``allowed`` gives it (a newcomer, nothing placed nor measured,
    at most an equal share), every size but ``placed`` charged for the change."""
    low, high = allowed
    progress = job.spec.progress
    if not placed and not _measured(session, job):
        high = max(low, min(high, share.fair))  # a newcomer: an equal share at most
    curve = speedups(progress, fits, most=high, fair=share.fair, per_node=share.per_node)
    role = job.spec.elastic_role()
    assert role is not None and role.elastic is not None
    since, cost = _since(session, job), role.elastic.cost
    scaled = curve * (since / (since + cost) if since + cost > 0 else 1.0)
    if placed <= high:
        scaled[placed] = curve[placed]  # staying as it is costs nothing
    out[low : high + 1] = _term(scaled[low : high + 1], power)


def _near_end_weights(
    jobs: list[JobInfo], fits: Fits, fair: int, per_node: int, exponent: float
) -> NDArray[np.float64]:
    """Each job's weight in the power mean: ``(left / typical) ** -exponent``, where
    ``left`` is the seconds it still needs on ``fair`` GPUs (``remaining_seconds``) and
    ``typical`` the geometric mean of that over the jobs that say; 1 for a job that does
    not (it has not reported its target or run yet)."""
    said = [remaining_seconds(j.spec.progress, fits, gpus=fair, per_node=per_node) for j in jobs]
    return _weights(np.array([np.nan if s is None else s for s in said]), exponent)


def _shut_out(
    session: Session, jobs: list[JobInfo], capacity: int, suspend_above: float, *, by_left: bool
) -> set[str]:
    """The jobs that get no GPUs because the jobs outnumber them (their minimums sum to
    more than ``capacity``). Within each queue (across queues, reclaim keeps the
    shares), the GPUs its jobs hold and the idle ones go by priority, then least
    attained service (two levels, ``_served_level``), then (``by_left``, in the served
    level) least remaining on one GPU, then running jobs before waiting ones, then first
    come first served. Jobs that keep their size, and running jobs of the lower level,
    run whatever their place."""
    sizes = [_sizes(job) for job in jobs]
    least_of = [_least(job) for job in jobs]
    if (
        sum(max(placed, least) for (_, placed), least in zip(sizes, least_of, strict=True))
        <= capacity
    ):
        return set()  # room for every job whatever it keeps: the common case, cheaply
    now = session.now
    needed = 0
    held: dict[str, int] = {}
    fits = session.kept.get(Fits, Lifetime.FIXED)
    contenders: dict[str, list[tuple[int, int, float, int, float, str, int]]] = {}
    for job, (size, placed), least in zip(jobs, sizes, least_of, strict=True):
        queue = job.queue.name
        if _allowed(session, job, size, placed, 0.0, capacity) is None:
            needed += placed  # it keeps its size this session (and holds it)
            continue
        needed += least
        level = _served_level(job, now, suspend_above)
        held[queue] = held.get(queue, 0) + placed
        if placed and not level:
            held[queue] -= least  # not to be suspended: at least its minimum
            continue
        left = _left_on_one(job, fits) if by_left and level else 0.0
        rank = (-job.priority, level, left, 0 if placed else 1)
        contenders.setdefault(queue, []).append((*rank, job.creation_time, job.name, least))
    if needed <= capacity:
        return set()
    idle = max(0, capacity - sum(placed for _, placed in sizes))
    shut: set[str] = set()
    for queue, line in contenders.items():
        budget = held.get(queue, 0) + idle
        for *_rank, _created, name, least in sorted(line):
            if least <= budget:
                budget -= least
            else:
                shut.add(name)
    return shut


def _left_on_one(job: JobInfo, fits: Fits) -> float:
    """Seconds ``job`` still needs on one GPU (infinite when it does not say)."""
    left = remaining_seconds(job.spec.progress, fits, gpus=1, per_node=1)
    return math.inf if left is None else left


def _least(job: JobInfo) -> int:
    """The fewest replicas ``job``'s elastic role runs at."""
    role = job.spec.elastic_role()
    assert role is not None and role.elastic is not None
    return role.elastic.min_replicas


def _served_level(job: JobInfo, now: float, suspend_above: float) -> int:
    """1 when ``job`` has had at least ``suspend_above`` GPU-seconds and
    ``SUSPEND_COSTS`` times its rescale cost in seconds (a suspension costs it a stop
    and a restart: one that has run little is not worth suspending), else 0."""
    role = job.spec.elastic_role()
    cost = role.elastic.cost if role is not None and role.elastic is not None else 0.0
    return int(job.service(now) >= max(suspend_above, SUSPEND_COSTS * cost))


def _sizes(job: JobInfo) -> tuple[int, int]:
    """(tasks of the elastic role, of those placed)."""
    role = job.spec.elastic_role()
    assert role is not None
    mine = [t for t in job.tasks if t.role.name == role.name]
    return len(mine), sum(1 for t in mine if t.status in ON_NODE)


def _allowed(
    session: Session, job: JobInfo, size: int, placed: int, explore: float, capacity: int
) -> tuple[int, int] | None:
    """The sizes ``job`` (``size`` tasks, ``placed`` of them on nodes) may be given,
    lowest and highest (0 for a waiting job: it waits), or None when it keeps its size."""
    role = job.spec.elastic_role()
    assert role is not None and role.elastic is not None
    if role.resources.get("gpu") != 1.0:
        return None  # sized in one-GPU replicas only (Pollux's model)
    if _held(session, job, placed, role.elastic.interval):
        return None
    high = _explored(session, job, role, explore)
    high = max(min(high, capacity), min(placed, capacity))
    low = role.elastic.min_replicas if placed else 0
    if high < max(low, 1):
        return None
    return low, high


def _held(session: Session, job: JobInfo, placed: int, interval: float) -> bool:
    """Whether ``job`` (``placed`` tasks on nodes) keeps its size this session: a queue
    of it is overused (a waiting job stays waiting), or it runs and was rescaled less
    than ``interval`` seconds ago."""
    if any(session.points.overused(q) for q in job.queue.ancestors):
        return True
    last = job.spec.rescaled_at
    return bool(placed) and last is not None and session.now - last < interval


def _explored(session: Session, job: JobInfo, role: Role, explore: float) -> int:
    """The most replicas ``job``'s elastic ``role`` may have while it learns its speedup:
    its ``max_replicas``, and with ``explore`` > 0 at most ``explore`` times the most
    replicas it has reported a step on, or, before it has reported one or run at all
    (its timings then are bootstrapping points), the replicas its owner asked for (once
    it has reported anything, or while it is fresh: ``_fresh``)."""
    assert role.elastic is not None
    high = role.elastic.max_replicas
    if explore <= 0:
        return high
    progress = job.spec.progress
    if progress is not None and progress.timings and job.service(session.now) > 0:
        measured = max(t.replicas for t in progress.timings)
        return min(high, max(1, math.floor(explore * measured)))
    if progress is not None or _fresh(session, job, role.elastic.interval):
        return min(high, max(1, role.replicas))  # nothing measured yet: what it asked
    return high


def _first_start(job: JobInfo) -> float | None:
    """When the earliest of ``job``'s tasks now running started (None: none has)."""
    return min((t.start_time for t in job.tasks if t.start_time is not None), default=None)


def _fresh(session: Session, job: JobInfo, interval: float) -> bool:
    """Whether ``job`` has not yet run for ``interval`` seconds (no task started before)."""
    first = _first_start(job)
    return first is None or session.now - first < interval


def _since(session: Session, job: JobInfo) -> float:
    """Seconds since the job last changed size, or started, or arrived."""
    marks = [job.spec.rescaled_at, job.creation_time, _first_start(job)]
    latest = max(m for m in marks if m is not None)
    return max(0.0, session.now - latest)


def _typed_targets(
    session: Session,
    jobs: list[JobInfo],
    share: _Share,
    fits: Fits,
    shut: set[str],
    index: GpuTypeIndex,
    explore: float,
    remaining_exponent: float,
    power: float,
) -> _Plan:
    """``_targets`` on a cluster of several GPU types: each job's value per (type,
    size) from its goodput there (``typed.type_goodputs``), all of a job's types over
    one base (its goodput on an equal share of its slowest type), then ``search_typed``
    (see the module docstring)."""
    pools = type_pools(session.snapshot, index, jobs)
    capacity = np.array([p.capacity for p in pools], dtype=np.int64)
    width = int(capacity.max(initial=0)) + 1
    values = np.full((len(jobs), len(pools), width), np.inf)
    typed = np.zeros(len(jobs), dtype=np.bool_)  # it holds GPUs of a type now
    sized = np.zeros(len(jobs), dtype=np.bool_)
    left = np.full(len(jobs), np.nan)
    for row, job in enumerate(jobs):
        size, placed = _sizes(job)
        pinned = pinned_type(index, job) if placed else None
        typed[row] = pinned is not None
        if job.name in shut:
            sized[row] = True
            values[row, :, 0] = 0.0
            continue
        allowed = _allowed(session, job, size, placed, explore, share.capacity)
        if allowed is None:  # it keeps its size
            if pinned is not None:
                values[row, pinned, min(size, int(capacity[pinned]))] = 0.0
            else:
                values[row, :, 0] = 0.0
            continue
        sized[row] = True
        left[row] = _price_typed(
            values[row], session, job, placed, pinned, allowed, fits, share, pools, power
        )
    if remaining_exponent > 0:
        values *= _weights(left, remaining_exponent)[:, None, None]
    chosen, kind, prices = search_typed(values, capacity)
    sizes = {job.name: int(chosen[row]) for row, job in enumerate(jobs) if sized[row]}
    types: dict[str, tuple[str, ...]] = {}
    for row, job in enumerate(jobs):
        if sized[row] and not typed[row] and kind[row] >= 0:
            wished = _wished(values[row], int(kind[row]), prices)
            if wished:
                types[job.name] = tuple(pools[t].name for t in wished)
    return _Plan(sizes=sizes, types=types)


def _wished(values: NDArray[np.float64], kind: int, prices: NDArray[np.float64]) -> list[int]:
    """The types to send a job to, best first, given its values (types x sizes) and the
    type ``kind`` the plan gave it: that one where its values tell its types apart; for
    a job that knows nothing of them (the same values on each it may use), those types
    from the least contended (lowest price) on, or none (placement's own choice, by
    its other preferences) where they are all alike."""
    usable = [t for t in range(len(values)) if np.isfinite(values[t]).any()]
    if any(not np.array_equal(values[t], values[usable[0]]) for t in usable):
        return [kind]
    if len({float(prices[t]) for t in usable}) <= 1:
        return []
    return sorted(usable, key=lambda t: (float(prices[t]), t))


def _price_typed(
    out: NDArray[np.float64],
    session: Session,
    job: JobInfo,
    placed: int,
    pinned: int | None,
    allowed: tuple[int, int],
    fits: Fits,
    share: _Share,
    pools: list[TypePool],
    power: float,
) -> float:
    """Write into ``out`` (types x sizes) ``job``'s values: on its ``pinned`` type when
    it holds GPUs, each size but ``placed`` charged for the change (as ``_price``); else
    on every type its roles may use, uncharged (it pays its start whatever it is given,
    and the type must be chosen before it is placed); return the seconds it still needs
    on an equal share of its fastest type (nan where it does not say)."""
    low, high = allowed
    progress = job.spec.progress
    if not placed and not _measured(session, job):
        high = max(low, min(high, share.fair))  # a newcomer: an equal share at most
    most = max(high, share.fair)
    goodput, measured = type_goodputs(progress, fits, pools, most)
    usable = _usable_types(session, job, pools) if pinned is None else [pinned]
    if not usable:  # no type its roles may use: it waits
        out[:, 0] = 0.0
        return math.nan
    at_fair = [float(goodput[t, share.fair]) for t in usable if goodput[t, share.fair] > 0]
    base = min(at_fair, default=1.0)
    role = job.spec.elastic_role()
    assert role is not None and role.elastic is not None
    since, cost = _since(session, job), role.elastic.cost
    charge = since / (since + cost) if placed and since + cost > 0 else 1.0
    for t in usable:
        curve = goodput[t] / base
        scaled = curve * charge
        if placed and t == pinned and placed <= high:
            scaled[placed] = curve[placed]  # staying as it is costs nothing
        top = min(high, pools[t].capacity)
        if top >= low:
            out[t, low : top + 1] = _term(scaled[low : top + 1], power)
    if low == 0:
        out[:, 0] = _term(np.zeros(1), power)[0]
    total = None if progress is None else progress.total_samples
    done = None if progress is None else progress.samples
    if not measured or total is None or done is None or not at_fair:
        return math.nan
    return max(0.0, total - done) / max(at_fair)


def _usable_types(session: Session, job: JobInfo, pools: list[TypePool]) -> list[int]:
    """The types (rows of ``pools``) with a node every GPU role of ``job`` may use."""
    index = session.kept.get(gpu_type_index, Lifetime.FIXED)
    fit = np.ones(len(pools), dtype=np.bool_)
    for role in job.roles:
        if asks_gpus(role):
            mask = session.static_mask(role)[0]
            fit &= np.bincount(index.ids[mask & (index.ids >= 0)], minlength=len(pools)) > 0
    return [int(t) for t in np.flatnonzero(fit)]


def _weights(left: NDArray[np.float64], exponent: float) -> NDArray[np.float64]:
    """``(left / typical) ** -exponent`` per job, ``left`` its seconds still needed (at
    least 1; nan where it does not say, and then its weight is 1), ``typical`` their
    geometric mean over the jobs that say."""
    known = np.isfinite(left)
    if not known.any():
        return np.ones(len(left))
    seconds = np.maximum(np.where(known, left, 1.0), 1.0)
    typical = float(np.exp(np.log(seconds[known]).mean()))
    return np.where(known, (seconds / typical) ** -exponent, 1.0)


def _measured(session: Session, job: JobInfo) -> bool:
    """Whether ``job`` has run and reported step timings (bootstrapping points alone,
    reported before it ran, do not count)."""
    progress = job.spec.progress
    return progress is not None and bool(progress.timings) and job.service(session.now) > 0


def _term(speedup: NDArray[np.float64], power: float) -> NDArray[np.float64]:
    """Each speedup's term in the minimised sum: ``(s + EPS) ** power`` (at -1 computed
    as the inverse, bit for bit Pollux's)."""
    if power == -1.0:
        return 1.0 / (speedup + EPS)
    result: NDArray[np.float64] = (speedup + EPS) ** power
    return result
