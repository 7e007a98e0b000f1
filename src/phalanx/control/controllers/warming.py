"""The dataset warmer: datasets copied into nodes' caches ahead of the jobs that read
them (Fluid's DataLoad): ``DatasetWarmer``.

Guarantees:
- a dataset whose ``spec.warm`` is set is kept in the caches of the nodes it names
  (every node when it names none): each of them that does not hold the dataset's
  current listing is given a copy, on this controller's own thread, never in a
  request; a node that lost its copy (evicted to make room) is given it again;
- ``ask`` warms a dataset's current listing once on the nodes named (every node when
  none), as ``phalanx dataset warm`` asks, whenever they were tried last;
- otherwise a node is given a copy of one listing at most once per ``retry`` seconds, whether the
  last try failed (the source, the room) or succeeded (its cache says so once its next
  report lands): a cache too small for what it is asked to keep does not copy in a
  loop;
- ``states`` says, for a dataset's listing, which nodes hold it (Warm), which are being
  given it (Filling) and which could not be, with why (Failed: never a secret's value;
  a node that does not exist is named so).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from phalanx.control.controllers.data_inputs import DatasetInputs
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.store import datasets as stored
from phalanx.control.store.database import Database
from phalanx.data.cache import DatasetCache
from phalanx.data.copies import CopyFailed, DatasetCopy
from phalanx.domain.errors import InvalidInput
from phalanx.spec.dataset import DatasetDocument

log = logging.getLogger(__name__)

#: Seconds before a node is given the same listing again.
RETRY: Final = 60.0
WARM: Final = "Warm"
FILLING: Final = "Filling"
FAILED: Final = "Failed"


class NodeCaches(Protocol):
    """The nodes' dataset caches, as the warmer fills them: ``HostCache`` where tasks
    run on the server's host, ``executors.ray.data.NodeData`` on a Ray cluster."""

    def warm(self, nodes: Sequence[str], copy: DatasetCopy) -> dict[str, str]:
        """Copy ``copy`` into the caches of ``nodes``: why it could not be, by node
        (a node not in the answer holds it now)."""
        ...


class HostCache:
    """Every node is the server's host, whose one cache they share."""

    def __init__(self, cache: DatasetCache) -> None:
        self.cache = cache

    def warm(self, nodes: Sequence[str], copy: DatasetCopy) -> dict[str, str]:
        """Copy ``copy`` into the host's cache once, for all of ``nodes``."""
        try:
            copy.into(self.cache)
        except CopyFailed as error:
            return dict.fromkeys(nodes, str(error))
        return {}


@dataclass(frozen=True, slots=True)
class NodeState:
    """Where one node is with one listing of a dataset."""

    node: str
    state: str  # WARM, FILLING or FAILED
    message: str = ""


@dataclass(frozen=True, slots=True)
class _Want:
    """Dataset ``name`` of ``user`` at listing ``digest``, wanted on ``nodes`` (empty:
    every node)."""

    user: str
    name: str
    digest: str
    nodes: tuple[str, ...]
    asked: bool = False  # once, on request: nodes tried lately are tried again


class DatasetWarmer:
    """See the module docstring. ``held`` is what each node's cache holds (by node),
    ``nodes`` the names of the nodes now; ``start``/``stop`` its thread; ``poke`` when
    datasets were listed or changed."""

    def __init__(
        self,
        db: Database,
        inputs: DatasetInputs,
        caches: NodeCaches,
        *,
        held: Callable[[], Mapping[str, frozenset[str]]],
        nodes: Callable[[], Sequence[str]],
        period: float = 5.0,
        retry: float = RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db, self.inputs, self.caches = db, inputs, caches
        self._held, self._nodes = held, nodes
        self._period, self._retry, self._clock = period, retry, clock
        self._lock = threading.Lock()  # guards the two below: ``ask`` and ``states`` read them
        self._asked: dict[tuple[str, str], tuple[str, ...]] = {}
        #: by (user, name): the listing the states are of, and each node's state
        self._states: dict[tuple[str, str], tuple[str, dict[str, NodeState]]] = {}
        self._tried: dict[tuple[str, str], float] = {}  # (digest, node) -> when last tried
        self._ticker = Ticker("phalanx-dataset-warm", self.tick)

    def start(self) -> None:
        """Start warming on a thread of its own."""
        self._ticker.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the copy under way; False when it still ran after ``timeout``."""
        return self._ticker.stop(timeout)

    def poke(self) -> None:
        """Look at what to warm soon."""
        self._ticker.poke()

    def ask(self, user: str, name: str, nodes: Sequence[str]) -> None:
        """Warm ``user``'s dataset ``name`` once on ``nodes`` (empty: every node), soon;
        nodes given it lately are given it again."""
        with self._lock:
            self._asked[user, name] = tuple(dict.fromkeys(nodes))
        self.poke()

    def states(self, user: str, name: str, digest: str | None) -> list[NodeState]:
        """Each node's state with listing ``digest`` of ``user``'s dataset ``name``, by
        node: those holding it, being given it, or that could not be; none for None."""
        if digest is None:
            return []
        found = {
            node: NodeState(node, WARM)
            for node, digests in self._held().items()
            if digest in digests
        }
        with self._lock:
            of, states = self._states.get((user, name), ("", {}))
        if of == digest:
            for node, state in states.items():
                if node not in found or state.state == FILLING:
                    found[node] = state
        return [found[node] for node in sorted(found)]

    def tick(self) -> float:
        """One pass: give each node what it should hold and does not; seconds until the
        next."""
        try:
            for want in self._wanted():
                if self._ticker.stopping:
                    break
                self._warm(want)
        except Exception:  # a database outage: try again next pass
            log.exception("dataset warm pass failed; trying again")
        return self._period

    def _wanted(self) -> list[_Want]:
        """What should be warm now: the datasets with ``spec.warm``, then those asked."""
        with self._lock:
            asked, self._asked = self._asked, {}
        wanted: list[_Want] = []
        with self.db.session() as session:
            for row in stored.listing(session, None):
                spec = DatasetDocument.model_validate(row.document).spec
                if row.digest is None:
                    continue
                if (row.user, row.name) in asked:
                    nodes = asked[row.user, row.name]
                    wanted.append(_Want(row.user, row.name, row.digest, nodes, asked=True))
                if spec.warm is not None:
                    nodes = tuple(spec.warm.nodes)
                    wanted.append(_Want(row.user, row.name, row.digest, nodes))
        return wanted

    def _warm(self, want: _Want) -> None:
        """Give ``want`` to each of its nodes that does not hold it, was not tried lately."""
        known = set(self._nodes())
        held = self._held()
        now = self._clock()
        targets = list(want.nodes or sorted(known))
        states: dict[str, NodeState] = {
            node: NodeState(node, FAILED, f"there is no node {node} (phalanx get nodes)")
            for node in targets
            if node not in known
        }
        missing = [
            node
            for node in targets
            if node in known
            and want.digest not in held.get(node, frozenset())
            and (want.asked or now - self._tried.get((want.digest, node), -1e18) >= self._retry)
        ]
        if missing:
            self._publish(want, {**states, **{n: NodeState(n, FILLING) for n in missing}})
            problems = self._copy(want, missing)
            after = self._clock()
            for node in missing:
                self._tried[want.digest, node] = after
                if node in problems:
                    states[node] = NodeState(node, FAILED, problems[node])
                    log.warning(
                        "dataset %s of %s on %s: %s", want.name, want.user, node, problems[node]
                    )
        with self._lock:  # failures stand until a node is tried again
            of, before = self._states.get((want.user, want.name), ("", {}))
            kept = {
                node: state
                for node, state in before.items()
                if of == want.digest and state.state == FAILED and node not in missing
            }
        self._publish(want, {**kept, **states})

    def _copy(self, want: _Want, nodes: Sequence[str]) -> dict[str, str]:
        """Copy ``want`` into ``nodes``' caches: why it could not be, by node."""
        try:
            with self.db.session() as session:
                (copy,) = self.inputs.for_task(session, want.user, [(want.name, want.digest)])
        except InvalidInput as error:
            return dict.fromkeys(nodes, str(error))
        return self.caches.warm(nodes, copy)

    def _publish(self, want: _Want, states: dict[str, NodeState]) -> None:
        with self._lock:
            self._states[want.user, want.name] = (want.digest, states)
