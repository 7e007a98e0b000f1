"""Read-only pictures of the controller's state, published after every tick.

The API and /metrics read these immutable values instead of the engine's live state,
so a request never waits for (or sees half of) a tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from phalanx.control.controllers.core import Core
from phalanx.control.controllers.priorities import JobPriority
from phalanx.engine.cards import WHOLE
from phalanx.engine.decisions import Decisions
from phalanx.engine.snapshot import ON_NODE, Snapshot
from phalanx.engine.state import ClusterState


@dataclass(frozen=True, slots=True, kw_only=True)
class HostFacts:
    """What the host enforces on the tasks it runs, for people: ``limits`` (CPU, memory,
    processes: how, and the defaults) and ``identity`` (which uid tasks run as)."""

    limits: str = ""
    identity: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeUsage:
    """One node: capacity, allocated, each card's used share and tasks, and what the
    host its tasks run on enforces (``HostFacts``)."""

    name: str
    address: str | None  # as declared (Node.address); None: the executor's host
    capacity: Mapping[str, float]
    allocated: Mapping[str, float]
    labels: Mapping[str, str]
    network: Mapping[str, str] = field(default_factory=dict)  # tier -> switch (Node.network)
    gpu_models: tuple[str, ...]
    gpu_used: tuple[float, ...]
    gpu_tasks: tuple[tuple[str, ...], ...]
    schedulable: bool
    tasks: int
    ready: bool = True  # False: its executor lost it (a Ray node declared dead)
    limits: str = ""
    identity: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueUsage:
    """One queue's quotas and what it holds (canonical units).

    ``deserved`` is what the queue-share plugin gave it in the last session, never below its
    guarantee: a queue deserves its guarantee before any session ran (sessions run only
    while work waits) and whatever its demand. ``computed`` says whether a session
    computed it since the queues were last (re)built: when not, ``deserved`` is the
    guarantee alone, a floor rather than a share.
    """

    name: str
    guarantee: Mapping[str, float]
    deserved: Mapping[str, float]
    capability: Mapping[str, float]
    allocated: Mapping[str, float]
    computed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    """Nodes, queues and the jobs still in play, as of ``time``.

    ``live_jobs`` names every job the controller has taken in and not yet ended (not
    Succeeded, Failed or Cancelled): the tasks of such a job may still write output (a
    retry or a restarted gang appends to the same logs). A job submitted since the last
    tick is not in it yet.

    ``positions`` gives each job the last session left waiting its 1-based place in its
    leaf queue's line (the engine's ``Unschedulable.position``), replaced after every
    tick; a job absent from it is not waiting, or no session has ranked it yet (it was
    submitted since, or was refused as written). Kept in memory only.

    ``priorities`` gives each job waiting to start (Pending or Queued) its multifactor
    priority (``JobPriority``) as of ``time``, when ``fairshare`` says the scheduler
    config orders jobs by it; a job absent from it is not waiting, was submitted since,
    or the config has no ``fairshare`` plugin. Kept in memory only.
    """

    time: float = 0.0
    nodes: tuple[NodeUsage, ...] = ()
    queues: Mapping[str, QueueUsage] = field(default_factory=dict)
    gpu_total: float = 0.0
    gpu_allocated: float = 0.0
    live_jobs: frozenset[str] = frozenset()
    positions: Mapping[str, int] = field(default_factory=dict)
    fairshare: bool = False
    priorities: Mapping[str, JobPriority] = field(default_factory=dict)


def cluster_view(
    core: Core,
    host: HostFacts | None = None,
    alive: frozenset[str] | None = None,
    positions: Mapping[str, int] | None = None,
    priorities: Mapping[str, JobPriority] | None = None,
) -> ClusterView:
    """The current picture of ``core``'s engine state, every node on ``host``; a node
    not in ``alive`` is not ready (None: every node is); ``positions`` as the last
    session numbered the jobs it left waiting (None: none); ``priorities`` as
    ``Priorities.of`` gave them (None: the config has no fairshare plugin)."""
    host = host or HostFacts()
    state = core.state
    snapshot = state.snapshot
    held = _card_tasks(state)
    nodes = []
    for i, node in enumerate(snapshot.nodes):
        count = int(snapshot.cards.count[i])
        free = snapshot.cards.milli_free[i, :count]
        nodes.append(
            NodeUsage(
                name=node.name,
                address=node.address,
                capacity=_named(snapshot, snapshot.capacity[i]),
                allocated=_named(snapshot, snapshot.used[i]),
                labels=dict(node.labels),
                network=dict(node.network),
                gpu_models=tuple(g.model for g in node.gpus) or ("",) * count,
                gpu_used=tuple(float(1.0 - f / WHOLE) for f in free),
                gpu_tasks=tuple(tuple(held.get((i, card), ())) for card in range(count)),
                schedulable=bool(snapshot.schedulable[i]),
                tasks=int(snapshot.task_count[i]),
                ready=alive is None or node.name in alive,
                limits=host.limits,
                identity=host.identity,
            )
        )
    shares = state.shares
    queues = {
        name: QueueUsage(
            name=name,
            guarantee=_named(snapshot, info.guarantee),
            deserved=_named(snapshot, np.maximum(shares.get(name, info.guarantee), info.guarantee)),
            capability=_named(snapshot, info.capability),
            allocated=_named(snapshot, info.allocated),
            computed=name in shares,
        )
        for name, info in snapshot.queues.items()
    }
    gpu = snapshot.dim.get("gpu")
    total = float(snapshot.capacity[:, gpu].sum() / snapshot.unit[gpu]) if gpu is not None else 0.0
    used = float(snapshot.used[:, gpu].sum() / snapshot.unit[gpu]) if gpu is not None else 0.0
    return ClusterView(
        time=core.now,
        nodes=tuple(nodes),
        queues=queues,
        gpu_total=total,
        gpu_allocated=used,
        live_jobs=frozenset(core.life.jobs),  # C-speed copy of the keys: cheap next to a tick
        positions=positions or {},
        fairshare=priorities is not None,
        priorities=priorities or {},
    )


def places(decisions: Decisions | None) -> dict[str, int]:
    """The place in line of each job ``decisions`` left waiting (None: no session ran
    because nothing waited, so no job has one)."""
    if decisions is None:
        return {}
    return {u.job: u.position for u in decisions.unschedulable if u.position is not None}


def _named(snapshot: Snapshot, row: np.ndarray) -> dict[str, float]:
    """A row over the snapshot's dims in canonical units; infinite (no cap) left out."""
    values = row / snapshot.unit
    return {name: float(v) for name, v in zip(snapshot.dims, values, strict=True) if np.isfinite(v)}


def _card_tasks(state: ClusterState) -> dict[tuple[int, int], list[str]]:
    held: dict[tuple[int, int], list[str]] = {}
    for info in state.snapshot.jobs.values():
        for task in info.tasks:
            if task.status in ON_NODE:
                for card in task.gpus:
                    held.setdefault((task.node, card), []).append(task.name)
    return held
