"""Words for reasons: amounts in the units people write, and what the nodes hold.

A reason should read as the user wrote the job: ``needs 8 GPUs and 2 CPUs for its
minimum of 2 tasks; the most free on one node is 4 GPUs (node-3)``, not engine rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.resources import spoken_amount, spoken_list
from phalanx.engine.snapshot import EPSILON, Snapshot, Vector

_ORDER = {"gpu": 0, "cpu": 1, "memory": 2, "gpu-memory": 3}

#: The engine sees one flag; the control plane sets it for each of these.
UNSCHEDULABLE = "unschedulable (cordoned, draining or not ready)"


def speak(snapshot: Snapshot, row: Vector, *, dims: NDArray[Any] | None = None) -> str:
    """An engine-unit row in people's words, GPUs first: ``8 GPUs, 2 CPUs and 4Gi memory``.

    With ``dims`` (a row), exactly the names where it is non-zero are said, zeros too
    (``0 GPUs``)."""
    finite = np.where(np.isfinite(row), row, 0.0)
    if dims is None:
        return snapshot.resources(finite).spoken()
    names = [snapshot.dims[int(d)] for d in np.flatnonzero(dims)]
    names.sort(key=lambda n: (_ORDER.get(n, 9), n))
    return spoken_list(
        spoken_amount(n, float(finite[snapshot.dim[n]] / snapshot.unit[snapshot.dim[n]]))
        for n in names
    )


def most_free(snapshot: Snapshot, dim: int) -> tuple[str, float] | None:
    """The schedulable node with the most free of ``dim`` and that amount (engine units);
    None when no node is schedulable. Ties go to the first node."""
    free = np.where(snapshot.schedulable, snapshot.capacity[:, dim] - snapshot.used[:, dim], -1.0)
    if free.size == 0 or not bool(snapshot.schedulable.any()):
        return None
    k = int(np.argmax(free))
    return snapshot.nodes[k].name, float(max(free[k], 0.0))


def unschedulable_note(snapshot: Snapshot, dims: Vector | None = None) -> str | None:
    """``2 of 3 nodes are unschedulable (cordoned, draining or not ready), holding 16 GPUs``;
    None when every node takes work. ``dims`` (a row; its non-zero entries) limits the
    amounts named to what a job asks for (to GPUs alone when it asks for GPUs)."""
    off = ~snapshot.schedulable
    count = int(np.count_nonzero(off))
    if not count:
        return None
    held = snapshot.capacity[off].sum(axis=0)
    if dims is not None:
        gpu = snapshot.dim.get("gpu")
        if gpu is not None and dims[gpu] > EPSILON:  # GPUs say it; the rest is noise
            dims = np.where(np.arange(len(dims)) == gpu, 1.0, 0.0)
        held = np.where(dims > EPSILON, held, 0.0)
    amounts = speak(snapshot, held)
    holding = f", holding {amounts}" if held.any() else ""
    verb = "is" if count == 1 else "are"
    return f"{count} of {len(snapshot.nodes)} nodes {verb} {UNSCHEDULABLE}{holding}"
