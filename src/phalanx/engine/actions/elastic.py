"""elastic: grow elastic jobs into room no waiting job can use; take the growth back.

An elastic role (``Role.elastic``) runs at any size in ``min_replicas..max_replicas``;
its ``replicas`` is the size its owner asks for. This action runs after the others
(allocate, preempt, backfill), so what is idle when it runs is room that no waiting job
could use in this session:

- **Shrink first.** A gang still waiting for its minimum may evict other jobs' growth
  (the replicas of an elastic role above ``max(replicas, min_replicas)``), whatever its
  priority or queue: growth was only ever lent. Room is made all or nothing, the
  highest replicas first, as preempt makes it (``evict_for_gang``).
- **Then grow.** A running elastic job whose every replica is placed, that was not
  rescaled in the last ``interval`` seconds (hysteresis), grows by as many replicas as
  the idle room of the nodes its role may use (those of the GPU type it runs on, unless
  it may mix types: ``placement.gputypes``) holds (and its queues' capabilities
  allow), up to ``max_replicas``, when that pays for the rescale: growing ``n`` replicas
  by ``k`` for ``interval`` seconds, at a cost of ``cost`` seconds, does more work when
  ``k * (interval - cost) > n * cost`` (work taken as linear in the replicas).

**Targets.** When a plugin gives the sizes elastic jobs should have
(``elastic_targets``, e.g. ``goodput``), the jobs it names follow them instead of the
rule above: a job above its target shrinks to it (below the size its owner asked for
too, never below ``min_replicas``: the policy says so), a running job whose target is
0 is suspended (its tasks evicted: it waits again, keeping what it checkpointed), a
waiting job is sized to its target before it is placed, and a running job below its
target grows towards it (its whole interval apart, as above). Shrinks are decided
first, and the room their replicas give back (on their nodes and in their queues) is
the growths' in the same session, so a policy that moves GPUs from one job to another
does it at once. Only waiting gangs of jobs the plugin does not name take growth back
by eviction. Hysteresis is then the plugin's (``goodput`` charges every change its
cost).

**Re-placing.** Every change of size restarts a job's workers (a re-rendezvous), so a
job that changes size is re-placed then at no extra cost (``placement.replan``): its
replicas go to the fewest nodes that hold them (its own and the idle room), those off
that plan leave and new ones are placed where it has room (``Resize.leaving``). A job
at its target whose replicas span more nodes than that needs moves too, at most once
an interval.

A growth is a ``Resize`` decision: the lifecycle adds the replicas as pending tasks
and the driver runs the next cycle at once, whose allocate places them; those it cannot
place this action gives up (a ``Resize`` down). Without targets, no growth happens in a
session that evicted anything, so a shrink and a growth never meet in one cycle; no job
is grown twice within its interval: nothing flaps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import JobPhase
from phalanx.engine.decisions import Resize
from phalanx.engine.framework.plugin import Action
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import OpKind
from phalanx.engine.placement.eviction.gangs import evict_for_gang
from phalanx.engine.placement.eviction.growth import growth_of, lent
from phalanx.engine.placement.gputypes import job_mask
from phalanx.engine.placement.replan import Replan, replan, replica_fits
from phalanx.engine.snapshot import EPSILON, EVICTABLE, JobInfo, RoleInfo, TaskInfo, TaskStatus

#: A job with a task in any of these is placing, losing or ending tasks: it is not grown.
_SETTLING = (
    TaskStatus.PENDING,
    TaskStatus.PIPELINED,
    TaskStatus.RELEASING,
    TaskStatus.SUCCEEDED,
    TaskStatus.FAILED,
)


class ElasticAction(Action):
    """Take growth back for waiting gangs, then grow elastic jobs into idle room."""

    name = "elastic"

    def execute(self, session: Session) -> None:
        if not session.snapshot.elastic:
            return
        targets = session.points.elastic_targets()
        if targets is not None:  # a plugin decides, also when it changes nothing
            _follow(session, targets)
            return
        _give_up_unplaced_growth(session)
        if _shrink_for_waiting(session) or any(op.kind is OpKind.EVICT for op, _ in session.log):
            return
        for job in session.ranked(_growable(session)):
            grow = _growth(session, job)
            if grow:
                role = job.spec.elastic_role()
                assert role is not None
                size = _size(job)
                session.resizes.append(
                    Resize(
                        job=job.name,
                        role=role.name,
                        size=size + grow,
                        reason=f"grown into idle room no waiting job can use ({size} -> {size + grow})",
                    )
                )
                session.explain(f"elastic: {job.name} grows from {size} to {size + grow}")


def _follow(session: Session, targets: Mapping[str, int]) -> None:
    """Size the jobs ``targets`` names towards their targets (see the module docstring);
    the others as without targets. Shrinks come first, and the room their replicas free
    is the growths' in the same session (a policy that shrinks one job to grow another
    does both at once). A running job that changes size is re-placed on the fewest
    nodes (``replan``), and one at its target that could run on fewer nodes moves."""
    named = {name: job for name, job in session.snapshot.elastic.items() if name in targets}
    _give_up_unplaced_growth(session, skip=named)
    _shrink_for_waiting(session, skip=named)
    settled = {job.name for job in _settled(session)}
    growable = {job.name for job in _growable(session)}
    room = _Room(session)
    unplanned = 0  # growth placed by allocate, not by a plan: not taken out of ``room``
    for job in _shrinks_first(session.ranked(named.values()), targets):
        waiting = job.ready_count == 0
        if targets[job.name] == 0 and not waiting:
            _suspend(session, job, room)
            continue
        size = _size(job)
        step = _toward(
            session,
            job,
            size,
            _target(job, targets),
            room=room,
            unplanned=unplanned,
            growable=job.name in growable,
            settled=job.name in settled,
        )
        if step is None:
            continue
        target, reason = step
        plan = None if waiting else _replan(session, job, target, room.idle)
        if _worth_it(job, size, target, plan):
            unplanned += _resize_to(session, job, size, target, reason, plan, room)


def _shrinks_first(ranked: list[JobInfo], targets: Mapping[str, int]) -> list[JobInfo]:
    """``ranked`` with the jobs that give room back first (those above their target,
    waiting, or given no replicas), then the others; each part in rank order."""
    shrinking: list[JobInfo] = []
    others: list[JobInfo] = []
    for job in ranked:
        gives = _target(job, targets) < _size(job) or job.ready_count == 0 or not targets[job.name]
        (shrinking if gives else others).append(job)
    return shrinking + others


def _toward(
    session: Session,
    job: JobInfo,
    size: int,
    target: int,
    *,
    room: _Room,
    unplanned: int,
    growable: bool,
    settled: bool,
) -> tuple[int, str] | None:
    """The size ``job`` (``size`` replicas) goes to this session towards ``target``, and
    why; None when it stays as it is. A waiting job is sized to its target and a running
    one above it shrinks to it; a ``growable`` one below it grows as far as ``_grown``
    allows; a ``settled`` one at it keeps its size, to be re-placed when it is spread
    over more nodes than it needs (``_spread``)."""
    waiting = job.ready_count == 0
    if target < size or (waiting and target != size):
        verb = "sized" if waiting else "shrunk"
        return target, f"{verb} to the goodput policy's target ({size} -> {target})"
    if target > size and growable:
        return _grown(session, job, size, target, room, unplanned)
    if target == size and settled and _spread(session, job):
        return target, f"at the goodput policy's target ({size})"
    return None


def _grown(
    session: Session, job: JobInfo, size: int, target: int, room: _Room, unplanned: int
) -> tuple[int, str] | None:
    """The size ``job`` grows to from ``size``, at most ``target``: as far as ``room`` and
    its queues hold beyond the ``unplanned`` growth this session already gave out, and
    why; None when that is no replica."""
    grow = min(target - size, _growth(session, job, paying=False, room=room) - unplanned)
    if grow <= 0:
        return None
    return size + grow, f"grown towards the goodput policy's target ({size} -> {size + grow})"


def _worth_it(job: JobInfo, size: int, target: int, plan: Replan | None) -> bool:
    """Whether ``job`` is resized from ``size`` to ``target`` replicas placed by ``plan``:
    always when the size changes; at the same size only when ``plan`` puts it on fewer
    nodes."""
    if target != size:
        return True
    return plan is not None and _fewer_nodes(job, plan)


def _resize_to(
    session: Session,
    job: JobInfo,
    size: int,
    target: int,
    reason: str,
    plan: Replan | None,
    room: _Room,
) -> int:
    """Record ``job``'s ``Resize`` from ``size`` to ``target`` replicas (re-placed by
    ``plan`` when there is one) and take it out of ``room``. The replicas of growth left
    to allocate to place (not in ``room``'s accounts): 0 when ``plan`` places them."""
    role = job.spec.elastic_role()
    assert role is not None
    leaving = room.resize(job, target, plan)
    grown = max(target - size, 0)
    if plan is not None and (moved := int(plan.added.sum()) - grown):
        reason += f", {moved} replica(s) moved to fewer nodes"
    session.resizes.append(
        Resize(job=job.name, role=role.name, size=target, reason=reason, leaving=leaving)
    )
    session.explain(f"elastic: {job.name} {reason}")
    return grown if plan is None else 0


def _suspend(session: Session, job: JobInfo, room: _Room) -> None:
    """Stop every task of ``job`` (the policy gives it no GPUs: jobs outnumber them); it
    waits again with its progress, as a checkpointed job does, and its room is the
    growths'."""
    reason = "suspended for jobs that have had less service (jobs outnumber the GPUs)"
    with session.statement() as stmt:
        for task in job.tasks:
            if task.status in EVICTABLE:
                stmt.evict(task, action="elastic", by="", reason=reason)
        stmt.commit()
    room.resize(job, 0, None)
    session.explain(f"elastic: {job.name} {reason}")


def _target(job: JobInfo, targets: Mapping[str, int]) -> int:
    role = job.spec.elastic_role()
    assert role is not None and role.elastic is not None
    return max(targets[job.name], role.elastic.min_replicas)


class _Room:
    """The room a session's resizes share: each node's idle resources, with what the
    session's shrinks give back and its planned replicas take, and what each queue got
    back (its headroom for growth grows by it)."""

    def __init__(self, session: Session) -> None:
        self.idle = session.snapshot.idle.copy()
        self.returned: dict[str, NDArray[np.float64]] = {}

    def resize(self, job: JobInfo, size: int, plan: Replan | None) -> tuple[str, ...]:
        """Account for ``job``'s elastic role going to ``size`` replicas: the room of the
        replicas that stop comes back, that of new ones ``plan`` places goes (unplanned
        growth is placed by allocate wherever it fits). The names of the running
        replicas that move (``plan``'s leaving ones)."""
        role = job.spec.elastic_role()
        assert role is not None
        info = next(r for r in job.roles if r.name == role.name)
        mine = sorted((t for t in job.tasks if t.role is info), key=lambda t: -t.index)
        stopping = list(plan.leaving) if plan is not None else mine[: max(len(mine) - size, 0)]
        back = np.zeros_like(info.request)
        for task in stopping:
            if task.status in EVICTABLE and task.node >= 0:
                self.idle[task.node] += info.request
                back += info.request
        if plan is not None:
            self.idle -= plan.added[:, None] * info.request[None, :]
            back -= float(plan.added.sum()) * info.request
        for queue in job.queue.ancestors:
            self.returned[queue.name] = self.returned.get(queue.name, 0.0) + back
        return () if plan is None else tuple(t.name for t in plan.leaving)


def _spread(session: Session, job: JobInfo) -> bool:
    """Whether ``job``'s elastic role runs on more nodes than the fewest whose whole
    capacity would hold it (a cheap test before ``replan``)."""
    role = job.spec.elastic_role()
    assert role is not None
    info = next(r for r in job.roles if r.name == role.name)
    nodes = {t.node for t in job.tasks if t.role is info and t.node >= 0}
    if len(nodes) < 2:
        return False
    mask = _where(session, job, info)
    most = np.sort(np.where(mask, replica_fits(session.snapshot.capacity, info.request), 0))
    needed = int(np.searchsorted(np.cumsum(most[::-1]), _size(job))) + 1
    return len(nodes) > needed


def _fewer_nodes(job: JobInfo, plan: Replan) -> bool:
    """Whether ``plan`` puts ``job``'s elastic role on fewer nodes than it runs on."""
    role = job.spec.elastic_role()
    assert role is not None
    leaving = {t.name for t in plan.leaving}
    mine = [t for t in job.tasks if t.role.name == role.name and t.node >= 0]
    after = {t.node for t in mine if t.name not in leaving}
    after.update(int(n) for n in np.flatnonzero(plan.added))
    return len(after) < len({t.node for t in mine})


def _replan(session: Session, job: JobInfo, size: int, idle: NDArray[np.float64]) -> Replan | None:
    """Where ``job``'s elastic role goes at ``size`` replicas within ``idle`` room
    (``replan``); None when it cannot be re-placed now."""
    role = job.spec.elastic_role()
    assert role is not None
    info = next(r for r in job.roles if r.name == role.name)
    tasks = [t for t in job.tasks if t.role is info]
    if not tasks:
        return None
    mask = _where(session, job, info)
    fits = np.where(mask, replica_fits(idle, info.request), 0)
    scores = np.zeros(len(fits))
    if session.points.node_score:
        held = np.zeros(len(fits), dtype=np.bool_)
        held[[t.node for t in tasks if t.node >= 0]] = True
        candidates = np.flatnonzero((fits > 0) | held)
        scores[candidates] = session.points.node_score(tasks[0], candidates)
    return replan(tasks, size, fits, scores)


def _where(session: Session, job: JobInfo, info: RoleInfo) -> NDArray[np.bool_]:
    """The nodes ``job``'s replicas of ``info`` may use: its predicates, and the GPU type
    the job runs on unless it may mix types (``gputypes``: growth stays on its type)."""
    mask: NDArray[np.bool_] = session.static_mask(info)[0]
    typed = job_mask(session, job, info)
    return mask if typed is None else mask & typed


def _give_up_unplaced_growth(session: Session, skip: Collection[str] = ()) -> None:
    """A growth allocate could not place (the room went meanwhile) is given up (jobs in
    ``skip`` are left alone)."""
    for job in session.snapshot.elastic.values():
        if job.name in skip:
            continue
        unplaced = [t for t in growth_of(job) if t.status is TaskStatus.PENDING]
        if unplaced:
            size = _size(job) - len(unplaced)
            session.resizes.append(
                Resize(
                    job=job.name,
                    role=unplaced[0].role.name,
                    size=size,
                    reason=f"no room for the growth any more ({size + len(unplaced)} -> {size})",
                )
            )


def _shrink_for_waiting(session: Session, skip: Collection[str] = ()) -> bool:
    """Evict growth for each gang still below its minimum (but those in ``skip``);
    True when any room was made."""
    lent_tasks = lent(session.snapshot.elastic.values())
    if not lent_tasks:
        return False
    made = False
    waiting = [
        j
        for j in session.candidate_jobs()
        if j.ready_count < j.min_available and j.name not in skip
    ]
    for job in session.ranked(waiting):
        if job.counts[TaskStatus.PIPELINED]:
            continue
        victims = [t for t in lent_tasks if t.job is not job and t.status in EVICTABLE]
        if victims and evict_for_gang(
            session, job, _offering(victims), action="shrink", judge=_lent
        ):
            made = True
    return made


def _offering(victims: list[TaskInfo]) -> Callable[[JobInfo], Sequence[TaskInfo]]:
    return lambda _job: victims


def _lent(_task: TaskInfo, candidates: Sequence[TaskInfo]) -> Sequence[TaskInfo]:
    """Growth is anyone's to take back: every candidate is accepted."""
    return candidates


def _size(job: JobInfo) -> int:
    role = job.spec.elastic_role()
    assert role is not None
    return sum(1 for t in job.tasks if t.role.name == role.name)


def _settled(session: Session) -> list[JobInfo]:
    """Running elastic jobs, every replica placed and none leaving or done, not rescaled
    within their interval."""
    found = []
    for job in session.snapshot.elastic.values():
        role = job.spec.elastic_role()
        if role is None or role.elastic is None or job.phase is not JobPhase.RUNNING:
            continue
        if any(job.counts[status] for status in _SETTLING):  # placing, leaving or ending
            continue
        if job.ready_count < job.min_available:
            continue
        last = job.spec.rescaled_at
        if last is not None and session.now - last < role.elastic.interval:
            continue
        found.append(job)
    return found


def _growable(session: Session) -> list[JobInfo]:
    """Settled elastic jobs (``_settled``) below their maximum."""
    found = []
    for job in _settled(session):
        role = job.spec.elastic_role()
        assert role is not None and role.elastic is not None
        if _size(job) < role.elastic.max_replicas:
            found.append(job)
    return found


def _growth(
    session: Session,
    job: JobInfo,
    *,
    paying: bool = True,
    room: _Room | None = None,
) -> int:
    """How many replicas ``job`` grows by now: what idle room (the snapshot's, or
    ``room``'s) and its queues hold, up to its maximum, when the growth pays for the
    rescale (else 0; ``paying`` False: the caller has weighed the cost)."""
    role = job.spec.elastic_role()
    assert role is not None and role.elastic is not None
    info = next(r for r in job.roles if r.name == role.name)
    if any(session.points.overused(queue) for queue in job.queue.ancestors):
        return 0
    snapshot = session.snapshot
    request = info.request
    asks = request > EPSILON
    if not asks.any():
        return 0
    mask = _where(session, job, info)
    idle = (snapshot.idle if room is None else room.idle)[mask][:, asks]
    fits = np.floor((idle + EPSILON) / request[asks]).min(axis=1)
    replicas = int(fits[fits > 0].sum())
    for queue in job.queue.ancestors:
        free = queue.capability - queue.allocated
        if room is not None and queue.name in room.returned:
            free = free + room.returned[queue.name]
        headroom = float((free[asks] / request[asks]).min())
        if math.isfinite(headroom):
            replicas = min(replicas, max(0, math.floor(headroom + EPSILON)))
    size = _size(job)
    grow = max(0, min(replicas, role.elastic.max_replicas - size))
    interval, cost = role.elastic.interval, role.elastic.cost
    if paying and grow and grow * (interval - cost) <= size * cost:
        return 0
    return grow
