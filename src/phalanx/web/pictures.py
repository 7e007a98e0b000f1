"""The admin view's pictures, made from the API's answers: the queue tree with a bar
per resource, and the cluster as nodes x GPUs grouped by network domain.

Pure functions of ``QueueView`` and ``NodeView`` lists; nothing here asks the API.
Only what the API gives is drawn: a queue's guarantee, configured and computed deserved
shares, capability and allocation; a GPU's used fraction, its node's cordon and
readiness, and the node's place in the network (``NodeView.network``; a ``tor`` label
stands in for a node the Cluster document gives no place).

Borrowing is per resource and means what reclaim means by it (Kueue: usage above the
nominal quota, per resource): a queue borrows a resource when it holds more of it than
the deserved share the last scheduling session computed for it. That share is never
below the guarantee; it is the configured deserved share where the document names the
resource, its parent's share where the document's share leaves the resource out, and
a part of its parent's by weight where the document sets none: so a resource without a
guarantee is not borrowed merely by being used. Before a session has computed shares
(``QueueView.share_computed``) nothing is judged borrowed, as the
``phalanx_queue_over_quota`` metric says 0: the guarantee alone is a floor, not a share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from phalanx.client import NodeView, QueueView

#: Resources a queue's bars show, in order: always the first two, the others when the
#: queue has a figure for them.
BAR_RESOURCES: Final = ("gpu", "cpu", "memory")
_ALWAYS: Final = BAR_RESOURCES[:2]
#: The network tier (and, for nodes without a network place, the label) naming a node's
#: network domain: its top-of-rack switch.
DOMAIN_LABEL: Final = "tor"
_EPSILON: Final = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One resource of one queue, on a scale from 0 to ``scale``."""

    resource: str
    guarantee: float
    deserved: float  # the share the last session computed (the guarantee before one)
    #: whether ``deserved`` is a bounded share a session computed (QueueView.share_computed;
    #: an unbounded share is absent from the view's map)
    computed: bool
    configured: float | None  # the document's deserved share of it; None: not named
    capability: float | None  # None: no cap
    allocated: float
    scale: float

    @property
    def borrowed(self) -> float:
        """How much more the queue holds than the share the last session computed for it
        (what reclaim may take back); 0 within its share, and 0 before any session
        computed one."""
        if not self.computed or self.allocated <= self.deserved + _EPSILON:
            return 0.0
        return self.allocated - self.deserved

    @property
    def borrowing(self) -> bool:
        """Holding more than its computed share of this resource (``borrowed`` > 0)."""
        return self.borrowed > 0

    @property
    def over(self) -> bool:
        """More allocated than its capability."""
        return self.capability is not None and self.allocated > self.capability + _EPSILON


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueLine:
    """A queue in the tree, at ``depth`` (0: under the root)."""

    queue: QueueView
    depth: int
    bars: tuple[Bar, ...]

    @property
    def borrowed(self) -> tuple[Bar, ...]:
        """The bars of the resources it borrows, in bar order (empty: it borrows none)."""
        return tuple(bar for bar in self.bars if bar.borrowing)

    @property
    def borrowing(self) -> bool:
        """Borrowing in some resource."""
        return bool(self.borrowed)

    @property
    def over(self) -> bool:
        """Over its capability in some resource."""
        return any(bar.over for bar in self.bars)

    @property
    def lending(self) -> bool:
        """Using less than its configured deserved share of some resource it has one of."""
        return any(
            bar.configured is not None and bar.allocated + _EPSILON < bar.configured
            for bar in self.bars
        )


def _bar(queue: QueueView, resource: str) -> Bar | None:
    capability = queue.capability.get(resource)
    configured = None
    if queue.configured_deserved is not None:
        configured = queue.configured_deserved.get(resource)
    values = (
        queue.guarantee.get(resource, 0.0),
        queue.deserved.get(resource, 0.0),
        capability or 0.0,
        queue.allocated.get(resource, 0.0),
        configured or 0.0,
    )
    if max(values) <= 0 and resource not in _ALWAYS:
        return None
    return Bar(
        resource=resource,
        guarantee=values[0],
        deserved=values[1],
        computed=queue.share_computed and resource in queue.deserved,
        configured=configured,
        capability=capability,
        allocated=values[3],
        scale=max(values),
    )


def queue_tree(queues: Sequence[QueueView]) -> list[QueueLine]:
    """The queues depth first, children by name under their parent."""
    names = {queue.name for queue in queues}
    children: dict[str, list[QueueView]] = {}
    for queue in queues:
        parent = queue.parent if queue.parent in names else ""
        children.setdefault(parent, []).append(queue)
    lines: list[QueueLine] = []

    def walk(parent: str, depth: int) -> None:
        for queue in sorted(children.get(parent, ()), key=lambda q: q.name):
            bars = tuple(bar for r in BAR_RESOURCES if (bar := _bar(queue, r)) is not None)
            lines.append(QueueLine(queue=queue, depth=depth, bars=bars))
            walk(queue.name, depth + 1)

    walk("", 0)
    return lines


CellState = Literal["idle", "shared", "allocated", "cordoned", "down"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One GPU of the heatmap."""

    index: int
    state: CellState
    used: float  # 0..1 of the card
    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRow:
    """One node: its GPUs, and its CPU in use."""

    node: NodeView
    cells: tuple[Cell, ...]
    cpu_used: float  # 0..1


@dataclass(frozen=True, slots=True, kw_only=True)
class Domain:
    """The nodes of one network domain (``name`` "": nodes without a network place), and
    the domain's switches at the tiers above it (``above``: e.g. ``spine spine-0``)."""

    name: str
    rows: tuple[NodeRow, ...]
    above: str = ""


def domain_of(node: NodeView) -> tuple[str, str]:
    """The node's network domain (its ``tor`` switch, else its first declared tier's,
    else its ``tor`` label; "" for none) and its switches at the other tiers."""
    network = node.network
    if not network:
        return node.labels.get(DOMAIN_LABEL, ""), ""
    tier = DOMAIN_LABEL if DOMAIN_LABEL in network else next(iter(network))
    above = ", ".join(f"{t} {switch}" for t, switch in network.items() if t != tier)
    return network[tier], above


def _cell(node: NodeView, index: int, used: float, title: str) -> Cell:
    state: CellState
    if not node.ready:
        state = "down"
    elif node.cordoned or node.draining:
        state = "cordoned"
    elif used >= 1 - _EPSILON:
        state = "allocated"
    elif used > _EPSILON:
        state = "shared"
    else:
        state = "idle"
    return Cell(index=index, state=state, used=used, title=title)


def _row(node: NodeView) -> NodeRow:
    cells = []
    for gpu in node.gpus:
        tasks = ", ".join(gpu.tasks)
        others = f" (+{gpu.other_tasks} of others)" if gpu.other_tasks else ""
        title = f"{node.name} GPU {gpu.index} {gpu.model}: {gpu.used:.0%} used"
        if tasks or others:
            title += f"; {tasks}{others}"
        cells.append(_cell(node, gpu.index, gpu.used, title))
    capacity = node.capacity.get("cpu", 0.0)
    used = node.allocated.get("cpu", 0.0) / capacity if capacity else 0.0
    return NodeRow(node=node, cells=tuple(cells), cpu_used=used)


def heatmap(nodes: Sequence[NodeView]) -> list[Domain]:
    """The nodes by network domain (``domain_of``: named domains by name, then the nodes
    without one), each domain's nodes in the API's order."""
    found: dict[str, list[NodeRow]] = {}
    above: dict[str, str] = {}
    for node in nodes:
        name, over = domain_of(node)
        found.setdefault(name, []).append(_row(node))
        above.setdefault(name, over)
    order = sorted(found, key=lambda name: (name == "", name))
    return [Domain(name=name, rows=tuple(found[name]), above=above[name]) for name in order]
