"""Confinement: a plugin's ordered offer of node masks a job's gang is confined to (the
types of the ``confinement`` point; ``placement.confined`` places by them).

A plugin answering the ``confinement`` point gives a job a ``Confinement``. ``try_job`` then
places the job's pending tasks inside each offered mask in turn, each attempt undone
exactly when it fails, and the first attempt after which the job stands (ready, or
pipelined) wins. With ``group``, the tasks are placed ``group`` at a time, each group
inside one mask of the offer made for it, all in one statement. Jobs without a rule
are placed as if the point did not exist. A job held to one GPU type
(``placement.gputypes``) tries each offered mask with its type, or with each type in
turn: a plugin that offers the nodes of the type it prefers first chooses the type. A
rule with ``evict_within`` also says where reclaim and preempt may make room for each
of the job's tasks; without it they make room inside the masks the rule offers when
the victims' room is counted as free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.decisions import Reason
from phalanx.engine.snapshot import JobInfo, TaskInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfinementQuery:
    """What an offer is made for: ``tasks`` of ``job`` (role, then index order), and the
    room each node has for them now (read-only; the same rules as placement)."""

    job: JobInfo
    tasks: Sequence[TaskInfo]
    #: N x R: what each node can still give these tasks (withheld reservations left out;
    #: resources being released included when pipelining is allowed)
    free: NDArray[np.float64]
    #: N: how many more tasks each node may take
    slots: NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfinementOffer:
    """Node masks (over every node of the snapshot) to try, most preferred first, and why
    the tasks cannot go anywhere else: the job's reason when no mask is offered."""

    masks: tuple[NDArray[np.bool_], ...]
    reason: Reason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Confinement:
    """How one job is confined. ``key`` names everything the offers depend on besides
    the snapshot's state (it joins the gang's shape in the known-failure memo);
    ``group`` places the tasks that many at a time, each group with its own offer."""

    key: object
    offer: Callable[[ConfinementQuery], ConfinementOffer]
    group: int | None = None
    #: asked by reclaim and preempt before they make room for one task (``tasks`` holds
    #: it alone): the nodes where evictions may make room for it; None: any node
    evict_within: Callable[[ConfinementQuery], NDArray[np.bool_] | None] | None = None
