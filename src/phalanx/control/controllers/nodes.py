"""The nodes and queues as the controller follows them: ``Cluster``.

Guarantees:

- a node takes new tasks only while it is neither cordoned nor draining (the store's
  flags, an admin's) and, with an executor that reports its nodes (``NodeSource``),
  alive; the engine state's schedulable flags say so after every change of either;
- a node draining in the store is drained in the lifecycle each time its flags are read;
- a change of the queue table, or of the executor's node list, rebuilds the engine
  state from the store's queues (``Lifecycle.rebuild``: its jobs are kept);
- each source is read again only when its version moved (a table's row count and
  newest update, the executor's ``NodeState.version``), or when forced;
- what each node's dataset cache holds (``hold``: the executor's ``NodeState.datasets``,
  or the host's cache) is each node's ``Node.datasets`` in the engine's state, from the
  call on, and after any rebuild; a change of it alone rebuilds nothing;
- the cards out of scheduling (``store.cards``: cordoned by their health or an admin)
  are each node's ``Node.cordoned_gpus``; a change of them rebuilds the engine state
  (rare: a card breaks, an admin brings one back), and a card a node does not have is
  left out (a cordon outlives a node's replacement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from phalanx.control.controllers.core import Core
from phalanx.control.controllers.rebuild import new_state, queues_of
from phalanx.control.store import Session
from phalanx.control.store import cards as stored_cards
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store.database import Database
from phalanx.domain.node import Node
from phalanx.domain.resources import GPU
from phalanx.executors.base import NodeSource

_UNREAD: stored_cluster.Version = (0, None)


class Cluster:
    """The controller's view of nodes and queues (see the module docstring). ``nodes``
    is the node list now; ``alive`` the names of those alive (None: every node, for
    an executor without a node list of its own)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)
        self._reported = self.nodes  # as the executor last reported them
        self.held: Mapping[str, frozenset[str]] = {}  # what each node's cache holds
        self.alive: frozenset[str] | None = None
        self.draining: set[str] = set()  # as last read from the store
        self._schedulable: dict[str, bool] = {}  # the store's cordons and drains, by node
        self._queues_seen = self._nodes_seen = self._cards_seen = _UNREAD
        self._node_version = -1  # of the executor's NodeState, when it has one
        self.cordoned_cards: Mapping[str, frozenset[int]] = {}  # as last read from the store

    def forget(self) -> None:
        """Read every source again at the next call (a rebuild from the store)."""
        self._node_version = -1
        self._queues_seen = self._nodes_seen = self._cards_seen = _UNREAD

    def ready(self, node: Node) -> bool:
        """Whether ``node`` takes new tasks: not cordoned or draining, and alive."""
        ok = self._schedulable.get(node.name, node.schedulable)
        return ok and (self.alive is None or node.name in self.alive)

    def read_queues(self, session: Session, core: Core, *, force: bool = False) -> None:
        """Rebuild the engine state when the queues changed (or when ``force``d)."""
        version = stored_cluster.queues_version(session)
        if version == self._queues_seen and not force:
            return
        self._queues_seen = version
        queues = queues_of(stored_cluster.queues(session))
        ready = {node.name: self.ready(node) for node in self.nodes}
        core.record(core.life.rebuild(new_state(self.nodes, queues, ready)))

    def read_flags(self, session: Session, core: Core) -> None:
        """Take in the store's cordons and drains, when they changed."""
        version = stored_cluster.nodes_version(session)
        if version == self._nodes_seen:
            return
        self._nodes_seen = version
        rows = stored_cluster.nodes(session)
        self._schedulable = {row.name: not (row.cordoned or row.draining) for row in rows}
        self.apply_schedulable(core)
        self.draining = {row.name for row in rows if row.draining}
        self.drain(core)

    def read_cards(self, session: Session, core: Core) -> bool:
        """Take in the store's cordoned cards, when they changed (the engine state is
        rebuilt then); True when they did."""
        version = stored_cards.version(session)
        if version == self._cards_seen:
            return False
        self._cards_seen = version
        cordoned = stored_cards.by_node(session)
        if cordoned == self.cordoned_cards:
            return False
        self.cordoned_cards = cordoned
        self.nodes = _with_cards(self.nodes, cordoned)
        self.read_queues(session, core, force=True)
        return True

    def drain(self, core: Core) -> None:
        """Drain every draining node in the lifecycle (again: draining is idempotent)."""
        for name in sorted(self.draining):
            core.record(core.life.drain(name, now=core.now))

    def apply_schedulable(self, core: Core) -> None:
        """Set each node's schedulable flag in the engine state to ``ready``."""
        snapshot = core.state.snapshot
        for node in self.nodes:
            snapshot.set_schedulable(snapshot.node_index[node.name], self.ready(node))

    def follow(self, core: Core, db: Database | None) -> None:
        """Take in the executor's node changes (``NodeSource``): new or changed nodes
        join the engine's state (rebuilt from the store's queues, through ``db``), and a
        node that is not alive takes no new task; its tasks' LOST come from the
        executor. Without ``db`` only the node list is taken (the caller builds the
        state)."""
        executor = core.executor
        if not isinstance(executor, NodeSource):
            return
        state = executor.node_state()
        if state.version == self._node_version:
            return
        self._node_version = state.version
        self.alive = state.alive
        if state.nodes and state.nodes != self._reported:
            self._reported = state.nodes
            self.nodes = _with_cards(_holding(state.nodes, self.held), self.cordoned_cards)
            if db is not None:
                with db.session() as session:
                    self.read_queues(session, core, force=True)
        if db is not None:
            self.apply_schedulable(core)
        self.hold(core, state.datasets)

    def hold(self, core: Core, held: Mapping[str, frozenset[str]]) -> None:
        """Take in what each node's dataset cache holds now, by node (a node not named
        holds none)."""
        if held == self.held:
            return
        self.held = dict(held)
        self.nodes = _holding(self.nodes, held)
        snapshot = core.state.snapshot
        for node in self.nodes:
            index = snapshot.node_index.get(node.name)
            if index is not None:
                snapshot.set_datasets(index, node.datasets)


def _holding(nodes: Sequence[Node], held: Mapping[str, frozenset[str]]) -> tuple[Node, ...]:
    """``nodes``, each holding the datasets ``held`` names for it."""
    return tuple(
        node
        if node.datasets == held.get(node.name, frozenset())
        else replace(node, datasets=held.get(node.name, frozenset()))
        for node in nodes
    )


def _with_cards(nodes: Sequence[Node], cordoned: Mapping[str, frozenset[int]]) -> tuple[Node, ...]:
    """``nodes``, each with the cards ``cordoned`` names for it (those it has) out."""
    out = []
    for node in nodes:
        has = {gpu.index for gpu in node.gpus} or set(range(int(node.capacity.get(GPU))))
        cards = frozenset(cordoned.get(node.name, frozenset()) & has)
        out.append(node if node.cordoned_gpus == cards else replace(node, cordoned_gpus=cards))
    return tuple(out)
