"""Re-placing an elastic job when it changes size: its replicas on the fewest nodes.

Every change of an elastic job's size restarts its workers (torchrun re-rendezvous; a
restart-mode job stops and starts whole; Pollux's jobs restart from a checkpoint), so
at that moment its replicas can move at no extra cost. Grown or shrunk in place, a job
whose size follows the cluster ends up on as many nodes as the holes it was given, and
a data-parallel step synchronises over the network of every one of them (Pollux's
profiles: bert on four GPUs of four nodes takes about twice as long a step as on one).
Pollux's own search places jobs whole at every interval. ``replan`` says, for a job
about to have ``size`` replicas, which of its replicas leave and where new ones go:

- the room of a node is what its idle resources hold of the role's request plus the
  job's own replicas there (they may stay);
- the fewest nodes that hold ``size`` (``fewest_nodes``): the largest rooms first (on
  equal room, the node with more of the job's replicas), and for the last part the
  node that keeps most of the job's replicas, then the least room (a whole free node
  stays whole), then the best score, then the lowest index;
- the job keeps ``min(own, planned)`` replicas on each node; the rest leave (on each
  node, the highest index first); new replicas go where the plan has more than it
  keeps, so they only ever need room that is idle now.

Deterministic: it depends on its arguments only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.snapshot import EPSILON, EVICTABLE, TaskInfo


@dataclass(frozen=True, slots=True)
class Replan:
    """Where a resized job's replicas go: ``leaving`` stop, ``added[n]`` new ones go on
    node ``n`` (``added.sum()`` new replicas in all)."""

    leaving: tuple[TaskInfo, ...]
    added: NDArray[np.int64]


def fewest_nodes(
    room: NDArray[np.int64], own: NDArray[np.int64], scores: NDArray[np.float64], wanted: int
) -> NDArray[np.int64] | None:
    """Replicas per node for ``wanted`` replicas on the fewest nodes (``room[n]`` of them
    fit on node ``n``, ``own[n]`` of the job's are there; see the module docstring), or
    None when they do not fit."""
    if wanted <= 0:
        return np.zeros(len(room), dtype=np.int64)
    if int(room.sum()) < wanted:
        return None
    planned = np.zeros(len(room), dtype=np.int64)
    left = wanted
    free = room.copy()
    index = np.arange(len(room))
    while left > 0:
        last = np.flatnonzero(free >= left)
        if len(last):  # the last node: keeps most, least room, best score, lowest index
            kept = np.minimum(own[last], left)
            node = int(last[np.lexsort((last, -scores[last], free[last], -kept))[0]])
            planned[node] = left
            break
        node = int(np.lexsort((index, -scores, -own, -free))[0])  # the largest room
        planned[node] = int(free[node])
        left -= int(free[node])
        free[node] = 0
    return planned


def replan(
    tasks: list[TaskInfo],
    size: int,
    fits: NDArray[np.int64],
    scores: NDArray[np.float64],
) -> Replan | None:
    """The re-placement of a job's elastic role at ``size`` replicas: ``tasks`` are
    the role's replicas, ``fits[n]`` how many more of them node ``n``'s idle room holds (0 where
    the role may not go). None when ``size`` does not fit, or when the job has a
    replica that is not running (it is being placed or is leaving already)."""
    nodes = len(fits)
    own = np.zeros(nodes, dtype=np.int64)
    for task in tasks:
        if task.status not in EVICTABLE or task.node < 0:
            return None
        own[task.node] += 1
    planned = fewest_nodes(fits + own, own, scores, size)
    if planned is None:
        return None
    keep = np.minimum(own, planned)
    leaving: list[TaskInfo] = []
    for node in np.flatnonzero(own > keep):
        here = sorted((t for t in tasks if t.node == node), key=lambda t: -t.index)
        leaving.extend(here[: int(own[node] - keep[node])])
    return Replan(leaving=tuple(leaving), added=planned - keep)


def replica_fits(idle: NDArray[np.float64], request: NDArray[np.float64]) -> NDArray[np.int64]:
    """How many replicas asking ``request`` each node's ``idle`` room holds."""
    asks = request > EPSILON
    if not asks.any():
        return np.zeros(len(idle), dtype=np.int64)
    fits: NDArray[np.int64] = (
        np.floor((idle[:, asks] + EPSILON) / request[asks]).min(axis=1).astype(np.int64)
    )
    return fits
