"""Why no node can take a task: counts per short resource and the closest node, in words a
person can act on (the reason placement records for a task of a class it cannot place)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from phalanx.domain.node import CONTAINER_RUNTIME_LABEL
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.wording import speak, unschedulable_note
from phalanx.engine.snapshot import EPSILON, RoleInfo, Snapshot, TaskInfo

if TYPE_CHECKING:
    from phalanx.engine.placement.tasks import ClassPlacer

#: Resource names as counted in reasons (``2 short of GPUs``).
_WORD = {"gpu": "GPUs", "cpu": "CPUs", "gpu-memory": "GPU memory"}


def shortage_reason(placer: ClassPlacer, task: TaskInfo) -> Reason:
    """Why no candidate node can take ``task``: counts per short resource, the closest node."""
    snap = placer.session.snapshot
    role = task.role
    what = f"task {role.name} ({role.resources.spoken()})"
    total = len(snap.nodes)
    if placer.candidates.size == 0 and _no_runtime_for(snap, role):
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"0/{total} nodes can run {what} in its image {role.spec.image}: none "
            f"has a container runtime (label {CONTAINER_RUNTIME_LABEL}); fix: install "
            "podman on a node (a Cluster document's nodes declare the label), or remove "
            "image from the role to run it on the host",
        )
    off = unschedulable_note(snap, placer.request)
    if placer.candidates.size == 0:
        excluded = [f"{n} by {p}" for p, n in sorted(placer.excluded.items())]
        if off is not None:
            excluded.append(off)
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"0/{total} nodes match {what}: {'; '.join(excluded) or 'none'}; fix: "
            "relax the role's nodeSelector/affinity, add tolerations, or uncordon nodes",
        )
    too_big = (placer.request > snap.capacity[placer.candidates] + EPSILON).any(axis=1)
    if too_big.all():
        largest = snap.capacity[placer.candidates].max(axis=0)
        over = placer.request > largest + EPSILON
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"no node is big enough for {what}: the largest matching node has "
            f"{speak(snap, largest, dims=over)}; fix: split the task "
            "into more, smaller replicas or add bigger nodes",
            resource=snap.dims[int(np.argmax(over))],
        )
    if placer.demand is not None:
        roomy = placer.fits(placer.now_free)
        if roomy.any() and not (roomy & placer.cards_ok).any():
            return Reason(
                code=ReasonCode.INSUFFICIENT,
                message=f"{int(roomy.sum())}/{total} nodes have room for {what} but none "
                f"has cards for {placer.demand.describe()}: their free GPU is split across "
                "shared cards; fix: wait for shares to end, or ask for a share of one GPU",
                resource="gpu",
            )
    free = placer.future_free
    short = np.maximum(placer.request - free, 0.0)
    short[:, placer.request <= 0] = 0.0
    per_dim = {snap.dims[d]: int(np.count_nonzero(short[:, d] > EPSILON)) for d in placer.need}
    full = int(np.count_nonzero(placer.slots < 1))
    with_req = np.where(placer.request > 0, placer.request, 1.0)
    k = int(np.argmin((short / with_req).sum(axis=1) + (placer.slots < 1)))
    node = snap.nodes[int(placer.candidates[k])].name
    lacking = snap.resources(short[k])
    worst = max(per_dim, key=lambda name: (per_dim[name], name)) if per_dim else None
    counts = ", ".join(f"{n} short of {_WORD.get(name, name)}" for name, n in per_dim.items() if n)
    if full:
        counts += f"{', ' if counts else ''}{full} at max tasks"
    if placer.withheld is not None and placer.fits(placer.future_free + placer.withheld).any():
        return Reason(
            code=ReasonCode.BLOCKED_BY_RESERVATION,
            message=f"room for {what} is held for a starving job's reservation; "
            "fix: set a walltime or runtimeEstimate so it can backfill",
            node=node,
        )
    n_excluded = sum(placer.excluded.values())
    tail = f"; {n_excluded} more excluded by predicates" if n_excluded else ""
    if off is not None:
        tail += f"; {off}"
    closest = (
        f"closest is {node}, which lacks {lacking.spoken()}" if lacking else f"closest is {node}"
    )
    return Reason(
        code=ReasonCode.INSUFFICIENT,
        message=f"0/{total} nodes have room for {what}: {counts}{tail}; {closest}",
        resource=worst,
        node=node,
        shortfall=lacking,
    )


def _no_runtime_for(snap: Snapshot, role: RoleInfo) -> bool:
    """True when ``role`` runs in an image and no node has a container runtime."""
    if role.spec.image is None:
        return False
    return not (snap.label_column(CONTAINER_RUNTIME_LABEL) != None).any()  # noqa: E711
