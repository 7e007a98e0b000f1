"""Per-GPU state of every node: which cards are free, and how much of each shared card.

A task asks for GPUs in one of two shapes (``CardDemand``):

- whole cards: ``gpu: k`` with k a whole number; it takes k cards that nobody else
  uses, and all of their memory;
- a share of one card: ``gpu: 0.5`` (a compute share), ``gpu-memory: 10Gi`` (a memory
  share), or both; it takes that much of a single card, which other shares may use too.

Amounts are in engine units: milli-GPUs (a whole card is 1000) and bytes. Guarantees:
a card's milli-GPUs and memory are never given out beyond its capacity by ``take``; a
``give`` after a ``take`` of the same cards restores the state exactly (amounts are
whole numbers, so sums are exact); every query breaks ties on the lower card index.

A cordoned card (``Node.cordoned_gpus``) is offered to no new task: no query for room
(``usable``, ``fitting``, ``first_fit``, ``fits``, ``room``, ``serves``) names it and
``whole_free`` does not count it, whatever it holds. Its free amounts stay true (what no
task holds), so a task that already holds it keeps it exactly (``serves(...,
cordoned=True)``, as a task read in on a rebuild asks) and giving it back frees it in
those amounts alone. Plugins that read the free amounts themselves read ``open_milli``
(or mask with ``offered``). Without a cordoned card the queries cost what they did
before (``any_cordoned``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.node import Node
from phalanx.domain.resources import GPU, GPU_MEMORY

#: Milli-GPUs in one card.
WHOLE: Final = 1000.0
#: Marks a card slot a node does not have: nothing ever fits there.
ABSENT: Final = -1.0


@dataclass(frozen=True, slots=True)
class CardDemand:
    """What one task needs from a node's cards."""

    whole: int  # cards taken entirely (0 for a share)
    milli: float  # milli-GPUs of the one shared card (0 for whole cards)
    memory: float  # bytes: of the shared card, or the least memory each whole card must have
    #: the NICs nearest its cards are its own (a task of a multi-node job): cards whose NIC
    #: another such task holds do not serve it, and its NICs serve no other such task
    exclusive_nic: bool = False

    @property
    def shared(self) -> bool:
        """True for a share of one card."""
        return self.whole == 0

    def describe(self) -> str:
        """``2 whole GPUs`` or ``0.5 of one GPU, 10 GiB of its memory``."""
        if not self.shared:
            return f"{self.whole} whole GPU{'s' if self.whole > 1 else ''}"
        parts = [f"{self.milli / WHOLE:g} of one GPU"] if self.milli else ["a share of one GPU"]
        if self.memory:
            parts.append(f"{self.memory / 2**30:g} GiB of its memory")
        return ", ".join(parts)


def card_demand(milli: float, memory: float, *, multi_node: bool = False) -> CardDemand | None:
    """The card shape of a request of ``milli`` milli-GPUs and ``memory`` bytes of GPU memory;
    None when it asks for no GPU. More than one GPU must be a whole number of GPUs
    (``ValueError`` otherwise: the caller names the field). Whole-GPU tasks of a
    ``multi_node`` job hold their NICs exclusively."""
    if milli <= 0 and memory <= 0:
        return None
    if milli < WHOLE:
        return CardDemand(whole=0, milli=max(milli, 0.0), memory=max(memory, 0.0))
    whole, rest = divmod(milli, WHOLE)
    if rest:
        raise ValueError(f"{milli / WHOLE:g} GPUs: a task takes a share of one GPU or whole GPUs")
    return CardDemand(
        whole=int(whole), milli=0.0, memory=max(memory, 0.0) / whole, exclusive_nic=multi_node
    )


class Cards:
    """Free milli-GPUs and memory of every card of every node (N nodes x G card slots).

    A node without a list of GPUs but with ``gpu`` capacity gets that many cards of
    unknown memory (memory shares never fit there). A card's slot is its index
    (``Gpu.index``), cordoned cards included.
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        counts = [len(node.gpus) or int(node.capacity.get(GPU)) for node in nodes]
        slots = max(counts, default=0)
        n = len(nodes)
        self.count: NDArray[np.int64] = np.array(counts, dtype=np.int64)
        present = np.arange(slots)[None, :] < self.count[:, None]
        self.memory_capacity: NDArray[np.float64] = np.zeros((n, slots))
        for i, node in enumerate(nodes):
            for gpu in node.gpus:
                self.memory_capacity[i, gpu.index] = gpu.memory
            if not node.gpus and counts[i] and node.capacity.get(GPU_MEMORY):
                self.memory_capacity[i, : counts[i]] = node.capacity.get(GPU_MEMORY) / counts[i]
        self.milli_free: NDArray[np.float64] = np.where(present, WHOLE, ABSENT)
        self.memory_free: NDArray[np.float64] = np.where(present, self.memory_capacity, ABSENT)
        #: cards out of scheduling (``Node.cordoned_gpus``), fixed for the object's life
        self.cordoned: NDArray[np.bool_] = np.zeros((n, slots), dtype=np.bool_)
        for i, node in enumerate(nodes):
            if node.cordoned_gpus:
                self.cordoned[i, sorted(node.cordoned_gpus)] = True
        self.cordoned.flags.writeable = False
        #: whether any card is cordoned: without one, no query spends time on the cordon
        self.any_cordoned = bool(self.cordoned.any())
        #: the cards a new task may be given: present and not cordoned (read-only)
        self.offered: NDArray[np.bool_] = present & ~self.cordoned
        self.offered.flags.writeable = False
        #: per node, the cards that serve a whole-GPU task now (free and offered)
        self.whole_free: NDArray[np.int64] = self.offered.sum(axis=1).astype(np.int64)
        #: each card's nearest NIC (an index into the node's NICs; -1: none known)
        self.nic_of: NDArray[np.intp] = np.full((n, slots), -1, dtype=np.intp)
        for i, node in enumerate(nodes):
            topology = node.gpu_topology
            if topology is not None and topology.nics:
                for card in range(topology.count):
                    self.nic_of[i, card] = topology.nearest_nic(card) or 0
        #: tasks holding each NIC exclusively; the last column stands for "no NIC" (never held)
        width = int(self.nic_of.max(initial=-1)) + 2
        self.nic_users: NDArray[np.int64] = np.zeros((n, width), np.int64)
        self.has_nics = width > 1  # without any, exclusive NICs constrain nothing
        #: held by tasks being stopped: free once they are gone (where pipelined tasks may go)
        self.milli_releasing: NDArray[np.float64] = np.zeros((n, slots))
        self.memory_releasing: NDArray[np.float64] = np.zeros((n, slots))
        #: tasks whose cards are marked releasing: none means ``later`` is the same as now
        self.releasing_tasks = 0

    # -- questions ----------------------------------------------------------------------

    def fits(
        self, demand: CardDemand, nodes: NDArray[np.intp] | slice, *, later: bool = False
    ) -> NDArray[np.bool_]:
        """Whether each of ``nodes`` can take one task of ``demand`` now (``later``: once the
        tasks being stopped there are gone)."""
        later = later and self.releasing_tasks > 0
        nics = demand.exclusive_nic and self.has_nics
        if not later and not demand.shared and not demand.memory and not nics:
            fit: NDArray[np.bool_] = self.whole_free[nodes] >= demand.whole
            return fit
        enough: NDArray[np.bool_] = self.usable(demand, nodes, later=later).sum(axis=1) >= max(
            demand.whole, 1
        )
        return enough

    def room(self, demand: CardDemand, node: int) -> int:
        """How many tasks of ``demand`` fit on ``node`` now."""
        if not demand.shared:
            fitting = self.usable(demand, slice(node, node + 1))[0]
            room = int(fitting.sum()) // demand.whole
            nics = demand.exclusive_nic and self.has_nics
            return min(room, 1) if nics else room  # NICs: one at a time
        per_card = np.full(self.milli_free.shape[1], np.inf)
        if demand.milli:
            per_card = np.floor(self.milli_free[node] / demand.milli)
        if demand.memory:
            per_card = np.minimum(per_card, np.floor(self.memory_free[node] / demand.memory))
        present = self.offered[node]
        if np.isinf(per_card[present]).any():
            return 1 << 30  # a share of nothing fits without end; the caller caps the run
        return int(per_card[present].clip(min=0).sum())

    def fitting(self, demand: CardDemand, node: int) -> NDArray[np.intp]:
        """Indexes of ``node``'s cards that can serve ``demand`` (each alone), ascending."""
        return np.flatnonzero(self.usable(demand, slice(node, node + 1))[0])

    def first_fit(self, demand: CardDemand, node: int) -> tuple[int, ...] | None:
        """The lowest-index cards of ``node`` that serve ``demand``; None when they do not fit."""
        cards = self.fitting(demand, node)
        need = max(demand.whole, 1)
        if cards.size < need:
            return None
        return tuple(int(c) for c in cards[:need])

    def serves(
        self, demand: CardDemand, node: int, gpus: Sequence[int], *, cordoned: bool = False
    ) -> bool:
        """True when ``gpus`` are distinct cards of ``node`` that can serve ``demand`` now;
        with ``cordoned``, a cordoned card serves too where it could but for the cordon
        (a task that holds it already keeps it: never for a task being placed)."""
        if len(gpus) != max(demand.whole, 1) or len(set(gpus)) != len(gpus):
            return False
        if any(g < 0 or g >= self.count[node] for g in gpus):
            return False
        rows = slice(node, node + 1)
        fit = self._serving(demand, rows) if cordoned else self.usable(demand, rows)
        return bool(fit[0][list(gpus)].all())

    def usable(
        self, demand: CardDemand, nodes: NDArray[np.intp] | slice, *, later: bool = False
    ) -> NDArray[np.bool_]:
        """Each card of each of ``nodes`` that could serve ``demand`` alone (nodes x cards);
        never a cordoned card."""
        fitting = self._serving(demand, nodes, later=later)
        if self.any_cordoned:
            fitting &= self.offered[nodes]
        return fitting

    def open_milli(self, nodes: NDArray[np.intp] | slice) -> NDArray[np.float64]:
        """Free milli-GPUs of each card of ``nodes`` that new tasks may use (nodes x cards):
        ``milli_free`` with cordoned cards read as ``ABSENT``, as missing ones are. For a
        plugin that reads the free amounts itself: what it finds free, no query refuses
        for being cordoned. Without a cordoned card, ``milli_free[nodes]`` itself."""
        if not self.any_cordoned:
            free: NDArray[np.float64] = self.milli_free[nodes]
            return free
        return np.where(self.offered[nodes], self.milli_free[nodes], ABSENT)

    def _serving(
        self, demand: CardDemand, nodes: NDArray[np.intp] | slice, *, later: bool = False
    ) -> NDArray[np.bool_]:
        """``usable`` as if no card were cordoned (a fresh array)."""
        milli, memory = self.milli_free[nodes], self.memory_free[nodes]
        if later and self.releasing_tasks:
            milli = milli + self.milli_releasing[nodes]
            memory = memory + self.memory_releasing[nodes]
        if demand.shared:
            return (milli >= demand.milli) & (memory >= demand.memory) & (milli >= 0)
        capacity = self.memory_capacity[nodes]
        fitting: NDArray[np.bool_] = (milli == WHOLE) & (memory == capacity)
        if demand.memory:
            fitting &= capacity >= demand.memory
        if demand.exclusive_nic and self.has_nics:
            held = np.take_along_axis(self.nic_users[nodes], self.nic_of[nodes], axis=1)
            fitting &= held == 0
        return fitting

    # -- changes ------------------------------------------------------------------------

    def take(self, demand: CardDemand, node: int, gpus: Sequence[int]) -> None:
        """Give ``gpus`` of ``node`` to one task of ``demand``. They must serve it (``serves``
        or ``first_fit`` said so): this is the hot path, it does not check again."""
        cards = list(gpus)
        if demand.shared:
            self.milli_free[node, cards] -= demand.milli
            self.memory_free[node, cards] -= demand.memory
            self._recount(node)
        else:
            milli, memory = self.milli_free[node], self.memory_free[node]
            for card in cards:  # a few scalar stores beat fancy indexing at this size
                milli[card] = 0.0
                memory[card] = 0.0
            # they were whole and free (``serves`` said so); a cordoned one was not counted
            self.whole_free[node] -= (
                self._offered_among(node, cards) if self.any_cordoned else len(cards)
            )
            if demand.exclusive_nic and self.has_nics:
                self._hold_nics(node, cards, 1)

    def give(self, demand: CardDemand, node: int, gpus: Sequence[int]) -> None:
        """Take back what ``take(demand, node, gpus)`` gave."""
        cards = list(gpus)
        if demand.shared:
            self.milli_free[node, cards] += demand.milli
            self.memory_free[node, cards] += demand.memory
            self._recount(node)
        else:
            milli, memory = self.milli_free[node], self.memory_free[node]
            capacity = self.memory_capacity[node]
            for card in cards:
                milli[card] = WHOLE
                memory[card] = capacity[card]
            self.whole_free[node] += (
                self._offered_among(node, cards) if self.any_cordoned else len(cards)
            )
            if demand.exclusive_nic and self.has_nics:
                self._hold_nics(node, cards, -1)

    def _offered_among(self, node: int, cards: list[int]) -> int:
        """How many of ``cards`` (of ``node``) are offered: all of them but cordoned ones."""
        return int(np.count_nonzero(self.offered[node, cards]))

    def nics(self, node: int, gpus: Sequence[int]) -> tuple[int, ...]:
        """The NICs (indexes into the node's topology) nearest ``gpus``, ascending."""
        return tuple(sorted({int(n) for n in self.nic_of[node, list(gpus)] if n >= 0}))

    def _hold_nics(self, node: int, cards: list[int], sign: int) -> None:
        nics = list(self.nics(node, cards))
        if nics:
            self.nic_users[node, nics] += sign

    def releasing(self, demand: CardDemand, node: int, gpus: Sequence[int], sign: int) -> None:
        """Mark (``sign`` 1) or unmark (-1) what a task holds on ``gpus`` as being released."""
        self.releasing_tasks += sign
        milli, memory = self.milli_releasing[node], self.memory_releasing[node]
        capacity = self.memory_capacity[node]
        for card in gpus:  # a few scalar stores beat fancy indexing at this size
            if demand.shared:
                milli[card] += sign * demand.milli
                memory[card] += sign * demand.memory
            else:
                milli[card] += sign * WHOLE
                memory[card] += sign * capacity[card]

    def _recount(self, node: int) -> None:
        whole = (self.milli_free[node] == WHOLE) & (
            self.memory_free[node] == self.memory_capacity[node]
        )
        if self.any_cordoned:
            whole &= self.offered[node]
        self.whole_free[node] = int(np.count_nonzero(whole))
