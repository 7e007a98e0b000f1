"""Making room for one task by evicting others: shared by reclaim and preempt.

Guarantees: victims are evicted only on a node where the task then fits (with the
resources being released counted, card by card for a task that needs GPUs), inside the
``within`` mask when one is given, taken in victim order and then reprieved, the latest
in victim order first, wherever the task still fits without them (as Kubernetes'
preemption does): no victim is evicted that the task does not need. Room is tried on
the (up to ``MAX_NODES_TRIED``) nodes that lack least for the task and whose accepted
victims hold that much, and made on the one where it costs least (``_cost``); a victim
job that would drop below its minAvailable is evicted whole, and only when every one of
its tasks is an accepted victim. Nothing is evicted when the task cannot fit anywhere.
With an allowance, victims whose eviction would take what is evicted past it are passed
over for the next ones in victim order.

Victims are offered to the plugins in victim order (a quota's filter keeps the first
ones), but only those on nodes where room could be made at all; when every plugin
judges each victim on its own (``VictimPoint.in_any_order``) they are offered as they
come and only those on the nodes tried are ordered. Ordering every running task for
every preemptor is what made preemption slow on busy clusters.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.cards import WHOLE, CardDemand, Cards
from phalanx.engine.framework.extension import VictimPoint
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import Statement
from phalanx.engine.snapshot import (
    EPSILON,
    EVICTABLE,
    JobInfo,
    QueueInfo,
    Snapshot,
    TaskInfo,
    Vector,
)

MAX_NODES_TRIED = 8  # nodes on which evictions are attempted for one task
CARD_SCAN = 4  # for a share, nodes whose cards are checked: this many per node tried

#: Given the task that needs room and a victim set, the victims the plugins accept.
Judge = Callable[[TaskInfo, Sequence[TaskInfo]], Sequence[TaskInfo]]


def make_room(
    session: Session,
    stmt: Statement,
    task: TaskInfo,
    candidates: Sequence[TaskInfo],
    judge: Judge,
    *,
    action: str,
    within: NDArray[np.bool_] | None = None,
    allowance: Vector | None = None,
) -> bool:
    """Evict accepted victims of ``candidates`` (``same_queue_victims``, say) on
    the node (of ``within``, a mask over every node, when given) where that costs least
    and pipeline ``task`` there; False, and nothing evicted, if no node can make room.

    ``allowance`` bounds what the victims evicted for the task may hold together, in
    every resource (None: no bound).
    """
    accepted = _accepted(session, task, candidates, judge, allowance, within)
    nodes = _candidate_nodes(session, task, accepted, allowance, within)
    if not nodes:
        return False
    chosen = set(nodes)
    victims = in_victim_order(session, [v for v in accepted if v.node in chosen])
    allowed = None if allowance is None else allowance + EPSILON
    node = _cheapest_node(session, stmt, task, nodes, victims, judge, action, allowed)
    if node is None:
        return False
    on_node = [v for v in victims if v.node == node]
    _evict_until_fits(session, stmt, task, on_node, judge, action, node, allowed)
    stmt.pipeline(task, node)
    return True


def _accepted(
    session: Session,
    task: TaskInfo,
    candidates: Sequence[TaskInfo],
    judge: Judge,
    allowance: Vector | None,
    within: NDArray[np.bool_] | None,
) -> Sequence[TaskInfo]:
    """The victims of ``candidates`` the plugins accept for ``task``, none of them holding
    alone more than ``allowance``. Plugins that judge each victim on its own are offered
    every candidate as it comes; otherwise only the candidates on nodes where room could
    be made at all are offered, in victim order. Evicts nothing."""
    accepted: Sequence[TaskInfo]
    if isinstance(judge, VictimPoint) and judge.in_any_order:
        # plugins that judge each victim on its own need no order, and what they accept
        # on nodes where no room can be made is never evicted anyway
        accepted = judge(task, candidates) if candidates else []
        return _affordable(session.snapshot, accepted, allowance)
    # only victims on nodes where room could be made at all are offered, in victim
    # order (a quota's filter accepts the first ones), so the rest need no ordering
    candidates = _affordable(session.snapshot, candidates, allowance)
    possible = _possible_nodes(session, task, candidates, allowance, within)
    offered = in_victim_order(session, [v for v in candidates if possible[v.node]])
    return judge(task, offered) if offered else []


def _cheapest_node(
    session: Session,
    stmt: Statement,
    task: TaskInfo,
    nodes: Sequence[int],
    victims: Sequence[TaskInfo],
    judge: Judge,
    action: str,
    allowed: Vector | None,
) -> int | None:
    """Of ``nodes``, tried in order, the one where evicting ``victims`` there until ``task``
    fits costs least (``_cost``; the earlier on a tie), the first that needs no eviction
    ending the search; None when room can be made on none. Each trial is undone: ``stmt``
    is left as it was found."""
    best: tuple[tuple[object, ...], int] | None = None
    for node in nodes:
        on_node = [v for v in victims if v.node == node]
        mark = len(stmt.operations)
        if not _evict_until_fits(session, stmt, task, on_node, judge, action, node, allowed):
            continue
        evicted = [op.task for op in stmt.operations[mark:]]
        cost = _cost(session, task, evicted)
        undo_since(session, stmt, mark)
        if best is None or cost < best[0]:
            best = (cost, node)
        if not cost[2]:  # room without evicting anything: nothing is cheaper
            break
    return None if best is None else best[1]


def _affordable(
    snap: Snapshot, victims: Sequence[TaskInfo], allowance: Vector | None
) -> Sequence[TaskInfo]:
    """``victims`` but those that alone hold more than ``allowance`` in some resource:
    evicting one of them could never stay within it."""
    if allowance is None or not victims:
        return victims
    rows = np.fromiter((v.role.row for v in victims), dtype=np.intp, count=len(victims))
    held = snap.requests.table()[rows]
    keep = np.all(held <= allowance + EPSILON, axis=1)
    return list(itertools.compress(victims, keep))


def _cost(session: Session, task: TaskInfo, evicted: Sequence[TaskInfo]) -> tuple[object, ...]:
    """What evicting ``evicted`` for ``task`` costs, smaller first: the most protected
    victim's place in victim order (as Kubernetes weighs the highest victim priority),
    then the dominant share of the cluster that is evicted in what the task asks for,
    then the number of victims."""
    if not evicted:
        return ((), 0.0, 0)
    worst = max(session.victim_rank(v)[0] for v in evicted)
    return (worst, dominant_share(session, task, evicted), len(evicted))


def dominant_share(session: Session, task: TaskInfo, tasks: Sequence[TaskInfo]) -> float:
    """The largest share of the cluster that ``tasks`` hold together in any resource
    ``task`` asks for (0 when it asks for none)."""
    total = session.snapshot.total
    asked = (task.request > 0) & (total > 0)
    if not tasks or not asked.any():
        return 0.0
    held = np.sum([t.request for t in tasks], axis=0)
    return float(np.max(held[asked] / total[asked]))


def _candidate_nodes(
    session: Session,
    task: TaskInfo,
    victims: Sequence[TaskInfo],
    allowance: Vector | None,
    within: NDArray[np.bool_] | None,
) -> list[int]:
    """Up to ``MAX_NODES_TRIED`` nodes where evicting some of ``victims`` could make room
    for ``task`` within ``allowance``, those lacking least first (nodes needing no
    eviction lead), ties by node index."""
    lack, fits = _lack(session, task, victims, allowance, within)
    rows = np.flatnonzero(fits)
    total = session.snapshot.total[task.request > 0]
    short = np.divide(lack[rows], total, out=np.zeros_like(lack[rows]), where=total > 0)
    share = np.max(short, axis=1, initial=0.0)
    ranked = rows[np.lexsort((rows, share))]
    demand = task.role.cards
    if demand is None or not demand.shared or not len(ranked):
        return [int(r) for r in ranked[:MAX_NODES_TRIED]]
    # a share needs room on one card, which node totals do not show: of the nodes lacking
    # least, those with a card the victims there could free enough of
    where = np.fromiter((v.node for v in victims), dtype=np.intp, count=len(victims))
    order = np.argsort(where, kind="stable")
    scanned = ranked[: CARD_SCAN * MAX_NODES_TRIED]
    starts = np.searchsorted(where[order], scanned, side="left")
    ends = np.searchsorted(where[order], scanned, side="right")
    found = []
    for node, lo, hi in zip(scanned.tolist(), starts.tolist(), ends.tolist(), strict=True):
        on_node = [victims[i] for i in order[lo:hi].tolist()]
        if _share_cards(session.snapshot.cards, demand, node, on_node) != []:
            found.append(node)
            if len(found) == MAX_NODES_TRIED:
                break
    return found


def _possible_nodes(
    session: Session,
    task: TaskInfo,
    victims: Sequence[TaskInfo],
    allowance: Vector | None,
    within: NDArray[np.bool_] | None,
) -> NDArray[np.bool_]:
    """Per node (of ``within`` when given): could evicting some of ``victims`` make room
    for ``task`` within ``allowance``."""
    return _lack(session, task, victims, allowance, within)[1]


def _lack(
    session: Session,
    task: TaskInfo,
    victims: Sequence[TaskInfo],
    allowance: Vector | None,
    within: NDArray[np.bool_] | None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per node, what ``task`` lacks there in each resource it asks for (counting the card
    a share would need, or the whole cards a task of whole GPUs would need), and whether
    ``victims`` there hold that much, within ``allowance`` (and the node is in ``within``,
    when given). Vectorised over nodes: a necessary condition for room, which the
    evictions then check exactly."""
    snap = session.snapshot
    mask, _ = session.static_mask(task.role)
    if within is not None:
        mask = mask & within
    request = task.request
    need = np.flatnonzero(request > 0)
    held, count = held_per_node(snap, victims, need)
    usable = mask & (snap.task_count - count < snap.max_tasks)
    lack = np.maximum(request[need] - snap.future_idle[:, need], 0.0)
    gpu = snap.dim.get("gpu")
    demand = task.role.cards
    if demand is not None and gpu is not None and gpu in need:
        column = int(np.flatnonzero(need == gpu)[0])
        lack[:, column] = np.maximum(lack[:, column], _card_lack(snap.cards, demand))
    fits = usable & (held + EPSILON >= lack).all(axis=1)
    if allowance is not None:
        fits &= (lack <= allowance[need] + EPSILON).all(axis=1)
    return lack, fits


def held_per_node(
    snap: Snapshot, tasks: Sequence[TaskInfo], columns: NDArray[np.intp]
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Per node, what ``tasks`` (each on a node) ask for together in ``columns`` of the
    snapshot's dimensions, and how many of them are there; vectorised over tasks."""
    n = len(snap.nodes)
    held = np.zeros((n, len(columns)))
    if not tasks:
        return held, np.zeros(n, dtype=np.int64)
    where = np.fromiter((t.node for t in tasks), dtype=np.intp, count=len(tasks))
    rows = np.fromiter((t.role.row for t in tasks), dtype=np.intp, count=len(tasks))
    asked = snap.requests.table()[:, columns][rows]
    for column in range(len(columns)):
        held[:, column] = np.bincount(where, weights=asked[:, column], minlength=n)
    return held, np.bincount(where, minlength=n)


def _share_cards(
    cards: Cards, demand: CardDemand, node: int, on_node: Sequence[TaskInfo]
) -> list[int] | None:
    """The cards of ``node`` on which evicting some of ``on_node`` could make room for the
    share ``demand`` (its milli-GPU and its memory), those needing least evicted first
    (then by index); None when a victim there holds GPU without known cards (any card may
    then serve)."""
    free = cards.milli_free[node] + cards.milli_releasing[node]
    milli = free.copy()
    memory = cards.memory_free[node] + cards.memory_releasing[node]
    for victim in on_node:
        held = victim.role.cards
        if held is None:
            continue
        if not victim.gpus:
            return None
        gpus = list(victim.gpus)
        milli[gpus] += held.milli if held.shared else WHOLE
        memory[gpus] += held.memory if held.shared else cards.memory_capacity[node, gpus]
    enough = (milli + EPSILON >= demand.milli) & (memory + EPSILON >= demand.memory)
    serving = np.flatnonzero(cards.offered[node] & enough)  # never a cordoned card
    return [int(c) for c in serving[np.lexsort((serving, -free[serving]))]]


def _card_lack(cards: Cards, demand: CardDemand) -> NDArray[np.float64]:
    """Per node, the milli-GPU still missing for ``demand`` on its best cards once what is
    being released is gone: a share's on its freest card, whole cards' in whole cards."""
    free = cards.milli_free + cards.milli_releasing
    present = cards.offered  # a cordoned card serves no new task, whatever it frees
    if demand.shared:
        best = np.max(np.where(present, free, 0.0), axis=1, initial=0.0)
        lack: NDArray[np.float64] = np.maximum(demand.milli - best, 0.0)
        return lack
    whole = (present & (free >= WHOLE - EPSILON)).sum(axis=1)
    missing: NDArray[np.float64] = np.maximum(demand.whole - whole, 0) * WHOLE
    return missing


def _evict_until_fits(
    session: Session,
    stmt: Statement,
    task: TaskInfo,
    on_node: list[TaskInfo],
    judge: Judge,
    action: str,
    node: int,
    allowed: Vector | None = None,
) -> bool:
    """Evict victims of ``on_node`` in order until ``task`` fits on ``node``, passing over
    any whose eviction (with its gang) would take what is evicted past ``allowed`` in
    some resource; then give back every one it fits without. A share of one GPU is given
    room on one card: of the victims holding GPUs, only those on that card are evicted
    (GPU-less ones after them, when still needed), on the card where that costs least
    (``_cost``). False, and nothing evicted, when it never fits."""
    mark = len(stmt.operations)
    reason = f"{past(action)} for {task.job.name} ({task.name}) of queue {task.job.queue.name}"
    # accepted already, and judged each on its own: asking again would give the same answer
    judged = set(on_node) if isinstance(judge, VictimPoint) and judge.in_any_order else set()

    def evict(victims: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Evict in order until the task fits; the victims whose eviction took place."""
        taken = []
        spent = 0.0
        for victim in victims:
            if _room(session, task, node):
                break
            if allowed is not None:
                group = np.sum([m.request for m in gang_group(victim)], axis=0)
                if ((spent + group) > allowed).any():
                    continue
            if evict_with_gang(
                stmt, task, victim, judge, action=action, reason=reason, accepted=judged
            ):
                taken.append(victim)
                if allowed is not None:
                    spent = spent + group
        return taken

    def settle(victims: Sequence[TaskInfo]) -> bool:
        """Evict ``victims`` in order until the task fits, then reprieve the ones it fits
        without; False, and nothing evicted, when it never fits."""
        taken = evict(victims)
        if not _room(session, task, node):
            undo_since(session, stmt, mark)
            return False
        for victim in reversed(taken[:-1]):  # the last one taken was needed: room came with it
            if victim not in taken:
                continue
            undo_since(session, stmt, mark)
            kept = evict([v for v in taken if v is not victim])
            if _room(session, task, node):
                taken = kept
            else:  # it was needed after all
                undo_since(session, stmt, mark)
                taken = evict(taken)
        return True

    demand = task.role.cards
    if demand is None or not demand.shared or _room(session, task, node):
        return settle(on_node)
    targets = _share_cards(session.snapshot.cards, demand, node, on_node)
    if targets is None:
        return settle(on_node)
    # a share needs room on one card: of the GPU holders, evict those on that card only,
    # then GPU-less victims if cpu or memory is still short (after, so that they spend no
    # victim budget the card needs), on the card where that costs least; on a tie, the
    # card whose most protected victim comes earliest in victim order
    gpu_less = [v for v in on_node if v.role.cards is None]
    best: tuple[tuple[object, ...], list[TaskInfo]] | None = None
    for card in targets:
        victims = [v for v in on_node if card in v.gpus] + gpu_less
        if settle(victims):
            evicted = [op.task for op in stmt.operations[mark:]]
            cost = (_cost(session, task, evicted), max(map(session.victim_rank, evicted)))
            undo_since(session, stmt, mark)
            if best is None or cost < best[0]:
                best = (cost, victims)
    return best is not None and settle(best[1])


def _room(session: Session, task: TaskInfo, node: int) -> bool:
    """Whether ``task`` fits on ``node`` once the tasks being released there are gone."""
    snap = session.snapshot
    request = task.request
    need = np.flatnonzero(request > 0)
    staying = snap.task_count[node] - snap.releasing_tasks[node]
    if staying >= snap.max_tasks[node]:
        return False
    idle = snap.capacity[node] - snap.used[node] + snap.releasing[node] - snap.pipelined[node]
    if not bool((idle[need] + EPSILON >= request[need]).all()):
        return False
    demand = task.role.cards
    return demand is None or bool(
        snap.cards.fits(demand, np.array([node], dtype=np.intp), later=True)[0]
    )


def in_victim_order(session: Session, victims: Iterable[TaskInfo]) -> list[TaskInfo]:
    """``victims`` sorted by the plugins' victim order, then the most recently started first."""
    return sorted(victims, key=session.victim_rank)


def evict_with_gang(
    stmt: Statement,
    task: TaskInfo,
    victim: TaskInfo,
    judge: Judge,
    *,
    action: str,
    reason: str,
    accepted: Collection[TaskInfo] = (),
) -> bool:
    """Evict ``victim`` for ``task``, with its whole gang when the gang cannot shrink,
    if the plugins accept every member that matters (``accepts_group``; a group all of
    whose members are in ``accepted``, victims the plugins accepted for ``task`` each on
    its own, is not judged again); False, and nothing evicted, otherwise."""
    if victim.status not in EVICTABLE:
        return False
    group = gang_group(victim)
    if not all(member in accepted for member in group) and not accepts_group(task, group, judge):
        return False
    for member in group:
        stmt.evict(member, action=action, by=task.job.name, reason=reason)
    return True


def past(action: str) -> str:
    """An eviction's action in the past tense: preempted, reclaimed, shrunk."""
    return {"shrink": "shrunk"}.get(action, f"{action}ed")


def gang_group(victim: TaskInfo) -> list[TaskInfo]:
    """The victim alone if its job can shrink, else every evictable task of its job."""
    job = victim.job
    if job.ready_count - 1 >= job.min_available:
        return [victim]
    return [t for t in job.tasks if t.status in EVICTABLE]


def same_queue_victims(session: Session, job: JobInfo) -> list[TaskInfo]:
    """What preemption may consider evicting for ``job``: the bound and running tasks of
    the other preemptible jobs of its queue, but those of jobs growing in this session."""
    return _settled(session, job.queue.evictable, job)


def other_queue_victims(session: Session, job: JobInfo) -> list[TaskInfo]:
    """What reclaim may consider evicting for ``job``: the bound and running tasks of the
    preemptible jobs of every other reclaimable queue, but those of growing jobs."""
    return [
        t
        for queue in session.snapshot.leaf_queues()
        if queue is not job.queue and queue.spec.reclaimable
        for t in _settled(session, queue.evictable, job)
    ]


def _settled(session: Session, evictable: dict[TaskInfo, None], job: JobInfo) -> list[TaskInfo]:
    """``evictable`` without the tasks of ``job`` and of the jobs that gained a task in
    this session (``Snapshot.growing``): evicting such a job "whole" would leave its new
    placements standing below its minimum, so it is no victim in the session that grew
    it."""
    left_out = {t for j in (job, *session.snapshot.growing) for t in j.tasks if t in evictable}
    if not left_out:
        return list(evictable)
    return [t for t in evictable if t not in left_out]


def accepts_group(task: TaskInfo, group: Sequence[TaskInfo], judge: Judge) -> bool:
    """Whether ``group`` may be evicted for ``task``.

    Members holding something the task needs must each be accepted by the plugins. A
    member holding none of it (a CPU-only launcher of a GPU gang) goes with its gang
    when the gang goes whole: it is not a victim in its own right and cannot veto.
    """
    accepted = {id(t) for t in judge(task, group)}
    asked = task.request > 0
    return all(id(m) in accepted for m in group if bool((m.request[asked] > 0).any())) and bool(
        accepted
    )


def undo_since(session: Session, stmt: Statement, mark: int) -> None:
    """Roll back the evictions ``stmt`` made after its first ``mark`` operations."""
    while len(stmt.operations) > mark:
        op = stmt.operations.pop()
        session.undo_evict(op.task, op.previous)


def fits_deserved(queues: Iterable[QueueInfo], minimum: Vector) -> bool:
    """Whether every queue of ``queues`` stays within its deserved share in what
    ``minimum`` asks for, with its allocated and admitted work (reclaim could make room)."""
    asked = minimum > 0
    return all(
        bool((q.allocated + q.inqueue + minimum <= q.deserved + EPSILON)[asked].all())
        for q in queues
    )


def preemption_covers(job: JobInfo, needed: Vector) -> bool:
    """Whether lower-priority, preemptible work of ``job``'s own queue holds at least
    ``needed`` in every resource it is needed of (preemption could make that room)."""
    lower = np.zeros_like(needed)
    for other in job.queue.jobs:
        if other.priority < job.priority and other.spec.preemptible:
            lower += other.allocated
    asked = needed > 0
    return bool((lower + EPSILON >= needed)[asked].all())
