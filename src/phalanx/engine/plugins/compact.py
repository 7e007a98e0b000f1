"""compact: an elastic job's replicas on as few nodes as they fit.

A data-parallel job synchronises its replicas every step; replicas on one node talk
over its NVLink or PCIe, replicas on several over the network, so the same GPUs spread
over more nodes train slower (Pollux's profiles: bert on four GPUs of four nodes takes
about twice as long a step as on one node). A job whose size follows the cluster is
placed often, a few replicas at a time, into whatever holes are free; scored one task
at a time, packing plugins fill the one-GPU holes first and leave such a job on as
many nodes as it has replicas. This plugin confines the replicas of an elastic role
(``confinement``) to the fewest nodes that hold them:

- the nodes already running the job's replicas first (most room first), then
- while more replicas are left than one node holds, the node with the most room, and
  for the rest, of the nodes that hold them all, the one the session's node scores
  prefer (spot-like capacity for an elastic role, with ``reclaimable``), then the one
  with the least room (best fit: a whole free node stays whole);
- then anywhere (the offer's last mask), so that packing never keeps a job waiting.

Remaining ties go to the lower node index; the offer depends on the snapshot and the
session's scores only, so it is deterministic. Jobs without an elastic role are left
to the other plugins.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.framework.confinement import Confinement, ConfinementOffer, ConfinementQuery
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import EPSILON, ON_NODE, JobInfo, TaskStatus


class CompactPlugin(Plugin[Session]):
    """Confines an elastic role's replicas to the fewest nodes that hold them."""

    name = "compact"

    def open(self, session: Session) -> Session:
        return session

    def confinement(self, state: Session, job: JobInfo) -> Confinement | None:
        role = job.spec.elastic_role()
        if role is None:
            return None
        return Confinement(key=(self.name, job.name), offer=partial(_offer, state, job))


def _offer(session: Session, job: JobInfo, query: ConfinementQuery) -> ConfinementOffer:
    everywhere = np.ones(len(query.slots), dtype=np.bool_)
    tasks = query.tasks
    if not tasks:
        return ConfinementOffer(masks=(everywhere,))
    request = tasks[0].request
    asks = request > EPSILON
    if not asks.any() or any(t.role is not tasks[0].role for t in tasks):
        return ConfinementOffer(masks=(everywhere,))
    mask, _ = session.static_mask(tasks[0].role)
    fits = np.floor((query.free[:, asks] + EPSILON) / request[asks]).min(axis=1)
    fits = np.minimum(fits, query.slots).astype(np.int64)
    fits[~mask] = 0
    scores = np.zeros(len(fits))
    if session.points.node_score:
        candidates = np.flatnonzero(fits > 0)
        scores[candidates] = session.points.node_score(tasks[0], candidates)
    chosen = _fewest(fits, scores, _holding(job, len(fits)), len(tasks))
    if chosen is None:
        return ConfinementOffer(masks=(everywhere,))
    return ConfinementOffer(masks=(chosen, everywhere))


def _holding(job: JobInfo, nodes: int) -> NDArray[np.bool_]:
    """The nodes running replicas of ``job`` (not those leaving)."""
    held = np.zeros(nodes, dtype=np.bool_)
    for task in job.tasks:
        if task.status in ON_NODE and task.status is not TaskStatus.RELEASING and task.node >= 0:
            held[task.node] = True
    return held


def _fewest(
    fits: NDArray[np.int64], scores: NDArray[np.float64], held: NDArray[np.bool_], wanted: int
) -> NDArray[np.bool_] | None:
    """The nodes to place ``wanted`` replicas on (``fits[n]`` of them fit on node ``n``,
    ``scores[n]`` its score): nodes in ``held`` first, most room first, then as the
    module docstring says; None when they do not fit at all."""
    if int(fits.sum()) < wanted:
        return None
    chosen = np.zeros(len(fits), dtype=np.bool_)
    left = wanted
    for node in np.flatnonzero(held & (fits > 0))[
        np.argsort(-fits[held & (fits > 0)], kind="stable")
    ]:
        if left <= 0:
            break
        chosen[node] = True
        left -= int(fits[node])
    room = np.where(chosen, 0, fits)
    while left > 0:
        whole = np.flatnonzero(room >= left)
        if len(whole):  # best score, then least room, then lowest index
            node = int(whole[np.lexsort((whole, room[whole], -scores[whole]))[0]])
        else:
            node = int(np.argmax(room))
        chosen[node] = True
        left -= int(room[node])
        room[node] = 0
    return chosen
