"""The bridge between task moves and the cards of a node (``engine.cards.Cards``): which
cards a task holds while it is on a node, and that they are given back when it leaves.

``Snapshot.move`` calls ``move_cards`` for every task that needs GPUs; reading a job in
calls ``hold_cards`` for its tasks already on a node.

A cordoned card (``Node.cordoned_gpus``) is never given to a task a session places
(ALLOCATED); a task that holds one already (read in on a rebuild, reported on a node by
a driver, or put back by an undo) keeps exactly the cards it names.
"""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.engine.cards import Cards
from phalanx.engine.snapshot.tasks import ON_NODE, TaskInfo, TaskStatus


def move_cards(
    cards: Cards, task: TaskInfo, status: TaskStatus, where: int, gpus: Sequence[int]
) -> None:
    """The card side of a move of ``task`` to ``status`` on node ``where`` (called before
    the task's status changes): a task leaving its node gives its cards back, one arriving
    holds ``gpus`` where they serve it, and a releasing task's cards are marked so."""
    demand = task.role.cards
    assert demand is not None
    old = task.status
    if task.gpus:
        if old is TaskStatus.RELEASING and status is not TaskStatus.RELEASING:
            cards.releasing(demand, task.node, task.gpus, -1)
        if status not in ON_NODE or where != task.node:
            cards.give(demand, task.node, task.gpus)
            task.gpus = ()
    if status in ON_NODE:
        if not task.gpus:
            hold_cards(cards, task, where, gpus, status=status)
        if status is TaskStatus.RELEASING and old is not TaskStatus.RELEASING and task.gpus:
            cards.releasing(demand, where, task.gpus, 1)


def hold_cards(
    cards: Cards,
    task: TaskInfo,
    node: int,
    gpus: Sequence[int],
    *,
    status: TaskStatus | None = None,
) -> None:
    """Give ``task`` (arriving on ``node`` in ``status``; None: its own, as for a task read
    in) the cards it needs, ``gpus`` where they serve, else the lowest-index cards that
    do (never a cordoned one). A task arriving in any status but ALLOCATED holds its
    cards already: ``gpus`` serve it on a cordoned card too."""
    demand = task.role.cards
    assert demand is not None
    holds = (task.status if status is None else status) is not TaskStatus.ALLOCATED
    chosen: Sequence[int] | None = gpus
    if not (gpus and cards.serves(demand, node, gpus, cordoned=holds)):
        chosen = cards.first_fit(demand, node)
    if chosen:  # none fit: the node is over-committed (a driver's report); hold nothing
        cards.take(demand, node, chosen)
        task.gpus = tuple(chosen)
