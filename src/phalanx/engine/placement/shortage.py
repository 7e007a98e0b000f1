"""Why no node can take a task: counts per short resource and the closest node, in words a
person can act on (the reason placement records for a task of a class it cannot place).

Where a node named in a reason about GPUs has cordoned cards (``Node.cordoned_gpus``),
the reason says so with the commands that bring them back: ``n3 (2 of its GPUs are
cordoned: phalanx uncordon n3 --gpu 1 and phalanx uncordon n3 --gpu 5)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from phalanx.domain.node import CONTAINER_RUNTIME_LABEL
from phalanx.domain.resources import GPU, Resources
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.wording import speak, unschedulable_note
from phalanx.engine.placement.gputypes import left_out
from phalanx.engine.snapshot import EPSILON, RoleInfo, Snapshot, TaskInfo

if TYPE_CHECKING:
    from phalanx.engine.placement.tasks import ClassPlacer

#: Resource names as counted in reasons (``2 short of GPUs``).
_WORD = {"gpu": "GPUs", "cpu": "CPUs", "gpu-memory": "GPU memory"}


def shortage_reason(placer: ClassPlacer, task: TaskInfo) -> Reason:
    """Why no candidate node can take ``task``: counts per short resource, the closest node."""
    role = task.role
    what = f"task {role.name} ({role.resources.spoken()})"
    if placer.candidates.size == 0:
        return _no_candidate(placer, role, what)
    too_big = _too_big(placer, what)
    if too_big is not None:
        return too_big
    split = _cards_split(placer, what)
    if split is not None:
        return split
    gap = _gap(placer)
    if _reserved_room(placer):
        return Reason(
            code=ReasonCode.BLOCKED_BY_RESERVATION,
            message=f"room for {what} is held for a starving job's reservation; "
            "fix: set a walltime or runtimeEstimate so it can backfill",
            node=gap.node,
        )
    return _insufficient(placer, what, gap)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Gap:
    """What the candidates lack for a task once what is being released is gone."""

    per_dim: dict[str, int]  # per resource the task asks for: candidates short of it
    full: int  # candidates at their max tasks
    node: str  # the closest candidate: least short in all, relative to the request
    lacking: Resources  # what ``node`` lacks


def _no_candidate(placer: ClassPlacer, role: RoleInfo, what: str) -> Reason:
    """The reason when no node passes the predicates: the missing container runtime when
    the role runs in an image and no node has one, else how many nodes each predicate
    excluded (and the unschedulable ones)."""
    snap = placer.session.snapshot
    total = len(snap.nodes)
    if _no_runtime_for(snap, role):
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"0/{total} nodes can run {what} in its image {role.spec.image}: none "
            f"has a container runtime (label {CONTAINER_RUNTIME_LABEL}); fix: install "
            "podman on a node (a Cluster document's nodes declare the label), or remove "
            "image from the role to run it on the host",
        )
    excluded = [f"{n} by {p}" for p, n in sorted(placer.excluded.items())]
    off = unschedulable_note(snap, placer.request)
    if off is not None:
        excluded.append(off)
    left = left_out(snap, role)
    if left is not None:
        excluded.append(left)
    return Reason(
        code=ReasonCode.NO_MATCHING_NODE,
        message=f"0/{total} nodes match {what}: {'; '.join(excluded) or 'none'}; fix: "
        "relax the role's nodeSelector/affinity/gpuTypes, add tolerations, or uncordon nodes",
    )


def _too_big(placer: ClassPlacer, what: str) -> Reason | None:
    """The reason when the task exceeds every candidate's capacity (naming the resources
    the largest falls short in); None when some candidate could hold it empty."""
    snap = placer.session.snapshot
    too_big = (placer.request > snap.capacity[placer.candidates] + EPSILON).any(axis=1)
    if not too_big.all():
        return None
    largest = snap.capacity[placer.candidates].max(axis=0)
    over = placer.request > largest + EPSILON
    cordoned = _cordoned_big_enough(placer)
    if cordoned is None:
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"no node is big enough for {what}: the largest matching node has "
            f"{speak(snap, largest, dims=over)}; fix: split the task "
            "into more, smaller replicas or add bigger nodes",
            resource=snap.dims[int(np.argmax(over))],
        )
    name = snap.nodes[cordoned].name
    return Reason(
        code=ReasonCode.NO_MATCHING_NODE,
        message=f"no node is big enough for {what}: the largest matching node has "
        f"{speak(snap, largest, dims=over)}; {name} would hold it with its cordoned cards "
        f"back{cordon_note(snap, cordoned)}; fix: uncordon them once repaired, split the "
        "task into more, smaller replicas or add bigger nodes",
        resource=snap.dims[int(np.argmax(over))],
        node=name,
    )


def _cordoned_big_enough(placer: ClassPlacer) -> int | None:
    """The first candidate that would be big enough for the task but for its cordoned
    cards; None when there is none (or no card is cordoned)."""
    snap = placer.session.snapshot
    if not snap.cards.any_cordoned:
        return None
    cand = placer.candidates
    whole = snap.capacity[cand] + snap.cordoned[cand]
    fits = ~(placer.request > whole + EPSILON).any(axis=1)
    return int(cand[int(np.argmax(fits))]) if fits.any() else None


def cordon_note(snap: Snapshot, node: int) -> str:
    """`` (2 of its GPUs are cordoned: phalanx uncordon n3 --gpu 1 and phalanx uncordon n3
    --gpu 5)``: node ``node``'s cordoned cards and the commands that bring them back (one
    card each); empty when it has none."""
    node_of = snap.nodes[node]
    cards = sorted(node_of.cordoned_gpus)
    if not cards:
        return ""
    verb = "is" if len(cards) == 1 else "are"
    commands = " and ".join(f"phalanx uncordon {node_of.name} --gpu {g}" for g in cards)
    return f" ({len(cards)} of its GPUs {verb} cordoned: {commands})"


def _cards_split(placer: ClassPlacer, what: str) -> Reason | None:
    """The reason when a task needing GPU cards has room now on some candidates but none
    of those has cards that can serve it; None otherwise (and for a task without cards)."""
    if placer.demand is None:
        return None
    roomy = placer.fits(placer.now_free)
    if not roomy.any() or (roomy & placer.cards_ok).any():
        return None
    total = len(placer.session.snapshot.nodes)
    return Reason(
        code=ReasonCode.INSUFFICIENT,
        message=f"{int(roomy.sum())}/{total} nodes have room for {what} but none "
        f"has cards for {placer.demand.describe()}: their free GPU is split across "
        "shared cards; fix: wait for shares to end, or ask for a share of one GPU",
        resource="gpu",
    )


def _gap(placer: ClassPlacer) -> _Gap:
    """What the candidates lack once what is being released is gone, in one pass over
    the candidates: the count short of each resource asked for, those at max tasks, and
    the closest (first of the least short, a full one counting one whole request more)."""
    snap = placer.session.snapshot
    short = np.maximum(placer.request - placer.future_free, 0.0)
    short[:, placer.request <= 0] = 0.0
    per_dim = {snap.dims[d]: int(np.count_nonzero(short[:, d] > EPSILON)) for d in placer.need}
    with_req = np.where(placer.request > 0, placer.request, 1.0)
    k = int(np.argmin((short / with_req).sum(axis=1) + (placer.slots < 1)))
    return _Gap(
        per_dim=per_dim,
        full=int(np.count_nonzero(placer.slots < 1)),
        node=snap.nodes[int(placer.candidates[k])].name,
        lacking=snap.resources(short[k]),
    )


def _reserved_room(placer: ClassPlacer) -> bool:
    """Whether some candidate would have room but for what is withheld for a starving
    job's reservation."""
    withheld = placer.withheld
    return withheld is not None and bool(placer.fits(placer.future_free + withheld).any())


def _insufficient(placer: ClassPlacer, what: str, gap: _Gap) -> Reason:
    """The reason when candidates lack room: how many are short of each resource or at
    max tasks, how many more the predicates excluded (and the unschedulable ones), and
    the closest node with what it lacks."""
    snap = placer.session.snapshot
    per_dim = gap.per_dim
    worst = max(per_dim, key=lambda name: (per_dim[name], name)) if per_dim else None
    counts = ", ".join(f"{n} short of {_WORD.get(name, name)}" for name, n in per_dim.items() if n)
    if gap.full:
        counts += f"{', ' if counts else ''}{gap.full} at max tasks"
    closest = f"closest is {gap.node}"
    if gap.lacking:
        closest += f", which lacks {gap.lacking.spoken()}"
        if gap.lacking.get(GPU) > 0:
            closest += cordon_note(snap, snap.node_index[gap.node])
    return Reason(
        code=ReasonCode.INSUFFICIENT,
        message=f"0/{len(snap.nodes)} nodes have room for {what}: {counts}"
        f"{_excluded_tail(placer)}; {closest}",
        resource=worst,
        node=gap.node,
        shortfall=gap.lacking,
    )


def _excluded_tail(placer: ClassPlacer) -> str:
    """``; 3 more excluded by predicates; 2 of 5 nodes are unschedulable ...``, each part
    only when it applies (empty when neither does)."""
    n_excluded = sum(placer.excluded.values())
    tail = f"; {n_excluded} more excluded by predicates" if n_excluded else ""
    off = unschedulable_note(placer.session.snapshot, placer.request)
    if off is not None:
        tail += f"; {off}"
    left = left_out(placer.session.snapshot, placer.role)
    if left is not None:
        tail += f"; {left}"
    return tail


def _no_runtime_for(snap: Snapshot, role: RoleInfo) -> bool:
    """True when ``role`` runs in an image and no node has a container runtime."""
    if role.spec.image is None:
        return False
    return not (snap.label_column(CONTAINER_RUNTIME_LABEL) != None).any()  # noqa: E711
