"""A node's GPUs sampled every few seconds, their use attributed to the tasks given them.

``GpuSampler`` opens NVML (``nvml.open_nvml``) on its first sample and reads every card
each time it is asked (``due`` says when the interval has passed); ``attribute`` shares
the cards' figures out among the tasks (the rules are ``readings.TaskGpuUse``'s);
``process_tree``/``process_trees`` give a task's processes, which is how NVML's
processes are matched to tasks. A node without NVML reports that it has none, once, not
an error every tick.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Final

import psutil

from phalanx.domain.errors import InvalidInput
from phalanx.telemetry.nvml import Nvml, NvmlAbsent, open_nvml
from phalanx.telemetry.readings import CardReading, NodeSample, TaskCards, TaskGpuUse

#: Seconds between two samples of a node's cards (DCGM's exporter collects every 30 s by
#: default; a few seconds keeps a task's figures live and costs well under 1% of a core).
DEFAULT_INTERVAL: Final = 5.0
#: Where Linux lists the node's processes (``process_trees`` reads it when it is there).
PROC = "/proc"


class GpuSampler:
    """One node's sampler (one thread uses it).

    Guarantees: NVML is opened once, at the first ``sample``; a node without NVML gives
    exactly one sample (``absent`` set, no cards) and then None, and is never due again;
    ``sample`` never raises for a card that fails (the card reads with ``error``)."""

    __slots__ = ("_absent_said", "_last_at", "_latest", "_module", "_nvml", "interval", "node")

    def __init__(self, node: str, *, nvml: Any = None, interval: float = DEFAULT_INTERVAL) -> None:
        """``nvml``: a pynvml-like module (``recorded.RecordedNvml`` in tests and demos);
        None: nvidia-ml-py's."""
        if not interval > 0:
            raise InvalidInput(
                f"{interval!r} is not a sampling interval", field="interval", fix="give seconds > 0"
            )
        self.node = node
        self.interval = interval
        self._module = nvml
        self._nvml: Nvml | NvmlAbsent | None = None
        self._latest: NodeSample | None = None
        self._last_at: float | None = None
        self._absent_said = False

    @property
    def latest(self) -> NodeSample | None:
        """The last sample taken (None before the first)."""
        return self._latest

    def due(self, now: float) -> bool:
        """Whether a sample is due at ``now``: none taken yet, or ``interval`` seconds
        since the last; never again once the node said it has no NVML."""
        if self._absent_said:
            return False
        return self._last_at is None or now - self._last_at >= self.interval

    def sample(self, tasks: Sequence[TaskCards], now: float) -> NodeSample | None:
        """Read every card at ``now`` and attribute it to ``tasks`` (the live tasks given
        this node's cards). On a node without NVML: the one sample saying why, then None."""
        if self._nvml is None:
            self._nvml = open_nvml(self._module)
        self._last_at = now
        if isinstance(self._nvml, NvmlAbsent):
            if self._absent_said:
                return None
            self._absent_said = True
            self._latest = NodeSample(node=self.node, at=now, absent=self._nvml.reason)
            return self._latest
        cards = self._nvml.read()
        self._latest = NodeSample(
            node=self.node,
            at=now,
            cards=cards,
            tasks=attribute(cards, tasks),
            driver=self._nvml.driver,
        )
        return self._latest

    def close(self) -> None:
        """Shut NVML down (a later ``sample`` opens it again)."""
        if isinstance(self._nvml, Nvml):
            self._nvml.close()
        self._nvml = None


def attribute(cards: Sequence[CardReading], tasks: Sequence[TaskCards]) -> tuple[TaskGpuUse, ...]:
    """Each task's use of its cards, in the order of ``tasks`` (``TaskGpuUse``'s rules).

    A card held by one task alone counts whole. On a card given to several tasks, each
    gets its processes' memory where NVML lists the card's processes with their memory
    and at least one belongs to one of those tasks (else the card's used memory split
    evenly), and its processes' SM share where NVML sampled one of them (else the card's
    utilisation). Never gives the tasks of a card more memory, together, than the card
    has in use, nor a task more than 100%. A card a task names that is not read counts
    for nothing."""
    by_index = {card.index: card for card in cards}
    holders: dict[int, list[int]] = {}
    for position, task in enumerate(tasks):
        for index in dict.fromkeys(task.gpus):
            holders.setdefault(index, []).append(position)
    shares: dict[tuple[int, int], tuple[float, int]] = {}  # (task, card) -> its figures there
    for index, positions in holders.items():
        card = by_index.get(index)
        if card is None:
            continue
        if len(positions) == 1:
            shares[positions[0], index] = (card.utilisation, card.memory_used)
            continue
        figures = _shared(card, [tasks[p].pids for p in positions])
        shares.update(((p, index), f) for p, f in zip(positions, figures, strict=True))
    uses = []
    for position, task in enumerate(tasks):
        mine = [shares[position, i] for i in dict.fromkeys(task.gpus) if (position, i) in shares]
        uses.append(
            TaskGpuUse(
                job=task.job,
                task=task.task,
                gpus=task.gpus,
                utilisation=sum(u for u, _ in mine) / len(mine) if mine else 0.0,
                memory=sum(m for _, m in mine),
            )
        )
    return tuple(uses)


def _shared(card: CardReading, owners: Sequence[frozenset[int]]) -> list[tuple[float, int]]:
    """The figures of each of the tasks (given by their pids) that share one card."""
    theirs = [[p for p in card.processes if p.pid in pids] for pids in owners]
    matched = any(theirs)
    if matched and all(p.memory is not None for ps in theirs for p in ps):
        memory = [sum(p.memory or 0 for p in ps) for ps in theirs]
        total = sum(memory)
        if total > card.memory_used:  # NVML's figures taken a moment apart: scale down
            memory = [m * card.memory_used // total for m in memory]
    else:
        memory = [card.memory_used // len(owners)] * len(owners)
    if matched and any(p.utilisation is not None for ps in theirs for p in ps):
        busy = [min(sum(p.utilisation or 0.0 for p in ps), 100.0) for ps in theirs]
    else:
        busy = [card.utilisation] * len(owners)
    return list(zip(busy, memory, strict=True))


def process_tree(pid: int) -> frozenset[int]:
    """``pid`` and all its descendants, now; none when ``pid`` is gone."""
    return process_trees((pid,))[pid]


def process_trees(roots: Iterable[int]) -> dict[int, frozenset[int]]:
    """Each root's process tree (itself and all its descendants), from one look at the
    node's processes: what a sampler calls once a tick for all its tasks. A root that is
    gone has none."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        if parent != pid:
            children.setdefault(parent, []).append(pid)
    trees: dict[int, frozenset[int]] = {}
    for root in roots:
        if root not in parents:
            trees[root] = frozenset()
            continue
        tree, stack = {root}, [root]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in tree:
                    tree.add(child)
                    stack.append(child)
        trees[root] = frozenset(tree)
    return trees


def _parents() -> dict[int, int]:
    """Every process of the node and its parent. On Linux, read from ``/proc/PID/stat``
    directly: a third of what psutil's ``process_iter`` costs a process (bench/telemetry.py
    runs this every tick); elsewhere through psutil."""
    if not os.path.isdir(PROC):
        return {
            p.pid: p.info["ppid"]
            for p in psutil.process_iter(["ppid"])
            if p.info.get("ppid") is not None
        }
    parents: dict[int, int] = {}
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{PROC}/{entry.name}/stat", "rb") as stat:
                line = stat.read()
        except OSError:  # it ended while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        parents[int(entry.name)] = int(line[line.rindex(b")") + 2 :].split(b" ", 2)[1])
    return parents
