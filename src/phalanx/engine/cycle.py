"""``run_cycle``: one scheduling session, the entry point both drivers share."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Final

from phalanx.domain.errors import EngineInvariantError
from phalanx.domain.job import JobPhase
from phalanx.engine.actions import BUILTIN_ACTIONS
from phalanx.engine.cards import WHOLE
from phalanx.engine.decisions import (
    Admit,
    Bind,
    Decisions,
    Evict,
    GpuShare,
    Pipeline,
    Reason,
    ReasonCode,
    Reservation,
    Unschedulable,
)
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.kept import Built, KeptState
from phalanx.engine.framework.plugin import join
from phalanx.engine.framework.registry import Registry
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.statement import OpKind
from phalanx.engine.plugins import BUILTIN_PLUGINS
from phalanx.engine.snapshot import JobInfo, Snapshot, TaskInfo, TaskStatus

#: Built once: a registry is immutable, and a ``KeptState`` keeps what a config builds
#: per registry (by identity), so every cycle without a registry of its own shares it.
_BUILTIN: Final = Registry.of(BUILTIN_PLUGINS, BUILTIN_ACTIONS)


def builtin_registry() -> Registry:
    """Every plugin and action that ships with phalanx, registered here (next to the
    cycle that runs them) so that the framework imports none of them."""
    return _BUILTIN


def _open(
    snapshot: Snapshot,
    config: SchedulerConfig,
    now: float,
    registry: Registry | None,
    kept: KeptState | None,
) -> tuple[Session, Built]:
    if kept is None:
        kept = KeptState(snapshot)
    elif kept.snapshot is not snapshot:
        raise EngineInvariantError("kept state of another snapshot")
    built = kept.built(config, registry or builtin_registry())
    session = Session(snapshot, config, now=now, kept=kept, class_scores=built.scores)
    for tier_index, plugin_config, plugin in built.plugins:
        join(session, plugin, plugin_config.name, tier_index, plugin_config.disabled)
    return session, built


def open_session(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    now: float,
    registry: Registry | None = None,
    kept: KeptState | None = None,
) -> Session:
    """A session with every configured plugin registered, before any action runs; with
    ``kept``, on what earlier cycles of ``snapshot`` kept (see ``framework.kept``)."""
    return _open(snapshot, config, now, registry, kept)[0]


def run_cycle(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    now: float,
    registry: Registry | None = None,
    kept: KeptState | None = None,
) -> Decisions:
    """Run every configured action on ``snapshot`` and return what was decided.

    Same snapshot + config + now + kept state => same Decisions (the contract, and where
    a kept state may decide otherwise than a fresh one, is stated in ``framework.kept``).
    The snapshot reflects the session's operations afterwards; a driver that keeps one
    snapshot up to date and applies the Decisions itself runs the cycle in a fork
    (``with snapshot.forked(): ...``), which leaves the snapshot exactly as before, and
    passes the same ``kept`` to every cycle (without it, everything is built afresh).
    """
    session, built = _open(snapshot, config, now, registry, kept)
    for action in built.actions:
        action.open(session)
    for action in built.actions:
        action.execute(session)
    return close_session(session)


def close_session(session: Session) -> Decisions:
    """Turn the session's log and state into Decisions."""
    binds: list[Bind] = []
    pipelined: list[Pipeline] = []
    evictions: list[Evict] = []
    nodes = session.snapshot.nodes
    ready: dict[JobInfo, bool] = {}  # asked once per job: nothing changes while closing
    for op, dispatch in session.log:
        task, job = op.task, op.task.job
        if op.kind is OpKind.EVICT:
            evictions.append(
                Evict(
                    job=job.name,
                    task=task.name,
                    node=nodes[op.node].name,
                    action=op.action,
                    by=op.by,
                    reason=op.reason,
                )
            )
        elif task.status is TaskStatus.ALLOCATED and dispatch and _ready(session, job, ready):
            binds.append(_bind(session, task))
        elif task.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            pipelined.append(Pipeline(job=job.name, task=task.name, node=nodes[task.node].name))
    return Decisions(
        admitted=tuple(Admit(job=name) for name in session.admitted),
        binds=tuple(binds),
        pipelined=tuple(pipelined),
        evictions=tuple(evictions),
        reservations=tuple(
            Reservation(
                job=h.job, nodes=tuple(nodes[i].name for i in h.nodes), start_time=h.start_time
            )
            for h in session.holds
        ),
        resized=tuple(session.resizes),
        unschedulable=_unschedulable(session),
        explanations=tuple(session.explanations),
    )


def _ready(session: Session, job: JobInfo, known: dict[JobInfo, bool]) -> bool:
    """``session.job_ready(job)``, asked once per job of ``known``."""
    found = known.get(job)
    if found is None:
        found = known[job] = session.job_ready(job)
    return found


def _bind(session: Session, task: TaskInfo) -> Bind:
    """The bind of an allocated task: its node, cards, share isolation and NICs."""
    node = session.snapshot.nodes[task.node]
    demand = task.role.cards
    share = nics = None
    if demand is not None and demand.shared and task.gpus:
        card_memory = session.snapshot.cards.memory_capacity[task.node, task.gpus[0]]
        share = GpuShare(
            compute_percent=min(100, max(1, math.ceil(demand.milli / 10))) if demand.milli else 100,
            memory_limit=demand.memory or float(card_memory) * demand.milli / WHOLE,
        )
    if demand is not None and demand.exclusive_nic and node.gpu_topology is not None:
        held = session.snapshot.cards.nics(task.node, task.gpus)
        nics = tuple(node.gpu_topology.nics[i].name for i in held)
    return Bind(
        job=task.job.name,
        task=task.name,
        role=task.role.name,
        index=task.index,
        node=node.name,
        gpus=task.gpus,
        share=share,
        nics=nics or (),
    )


def _unschedulable(session: Session) -> tuple[Unschedulable, ...]:
    """Every live job left without its gang placed, with the best reason known and its
    place in its queue's line: orphans first, then the rest in arrival order."""
    found: list[Unschedulable] = []
    for job, why in session.snapshot.orphans:
        found.append(
            Unschedulable(
                job=job.name, reason=Reason(code=ReasonCode.INVALID, message=why, queue=job.queue)
            )
        )
    live = session.waiting
    holds = {hold.job: hold for hold in session.holds}
    pending, pipelined = TaskStatus.PENDING, TaskStatus.PIPELINED
    left: list[tuple[JobInfo, Reason]] = []
    for info in live:
        counts = info.counts
        waiting = counts[pending] + counts[pipelined]
        if info.ready_count >= info.min_available or waiting == 0:
            continue
        reason = session.reasons.get(info.name)
        hold = holds.get(info.name)
        if hold is not None:
            nodes = ", ".join(session.snapshot.nodes[i].name for i in hold.nodes[:8])
            more = f" and {len(hold.nodes) - 8} more" if len(hold.nodes) > 8 else ""
            reason = Reason(
                code=ReasonCode.RESERVED,
                message=f"starving: {nodes}{more} are reserved for it from t={hold.start_time:g}s; "
                "only work that ends by then may use them"
                + (f" (now: {reason.message})" if reason is not None else ""),
            )
        elif reason is None:
            reason = _default_reason(session, info.phase)
        note = session.notes.get(info.name)
        if note is not None:
            reason = replace(reason, message=f"{reason.message}; {note}")
        left.append((info, reason))
    places = _places(session, [info for info, why in left if why.code is not ReasonCode.INVALID])
    found.extend(
        Unschedulable(job=info.name, reason=reason, position=places.get(info.name))
        for info, reason in left
    )
    return tuple(found)


def _places(session: Session, jobs: list[JobInfo]) -> dict[str, int]:
    """Each of ``jobs``' 1-based place among those of its leaf queue, in line order
    (``Session.ranked``: ties end on creation time, then name, so the numbering is
    deterministic). Only the jobs left pending are ranked, not every waiting job."""
    places: dict[str, int] = {}
    counts: dict[str, int] = {}
    for info in session.ranked(jobs):
        queue = info.queue.name
        places[info.name] = counts[queue] = counts.get(queue, 0) + 1
    return places


def _default_reason(session: Session, phase: JobPhase) -> Reason:
    if phase is JobPhase.PENDING and session.has_enqueue:
        return Reason(
            code=ReasonCode.NOT_ADMITTED,
            message="not admitted yet: its queue or the "
            "cluster cannot hold its minimum resources now",
        )
    return Reason(code=ReasonCode.INSUFFICIENT, message="not placed in this cycle")
