"""The Ray cluster as phalanx sees it: its nodes, their agents, and the news from both.

``RayCluster`` connects to a running Ray cluster (``ray.init(address=...)``: never
``"local"`` or ``"auto"``, which could start a cluster or attach a stale one), makes
sure every alive node has its agent (``agent``), has each probe its node
(``nodes.probe``), and keeps watching: every ``refresh`` seconds it reads Ray's node table, probes the nodes
that joined (or whose raylet restarted), marks those Ray declared dead, and calls
``on_change``. A second thread, the pump, keeps one ``events`` call outstanding on every
agent and queues what they report (``take``); it calls ``on_news`` when it queued
something. An agent that dies on a node Ray still calls alive is replaced, and the
replacement re-adopts the node's tasks from the records its predecessor last reported.

Every call to an agent presents the server's key (``AgentHandle``; the agent obeys no
one else, ``agent``'s docstring). An agent that refuses it belongs to another server
(or to this data dir before its key was lost): its node is left out, said once.

How fast a lost node is noticed is Ray's health check: ``period x threshold`` plus a
timeout (``RAY_health_check_period_ms``, ``..._failure_threshold``, ``..._timeout_ms``
on the head), then at most ``refresh`` seconds here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Node
from phalanx.executors.base import NodeState
from phalanx.executors.ray.agent import (
    AGENT_CONCURRENCY,
    AgentRefused,
    AgentSettings,
    NodeAgent,
    Report,
    agent_name,
    key_digest,
)
from phalanx.executors.ray.nodes import Probe, node_name, probed_node
from phalanx.executors.records import ProcessRecord
from phalanx.executors.taskgroups import LimitDefaults
from phalanx.telemetry.sampler import DEFAULT_INTERVAL

log = logging.getLogger(__name__)

#: Seconds between two reads of Ray's node table.
REFRESH: Final = 1.0
#: Seconds a new agent may take to answer (a worker process started on a busy node).
AGENT_START_TIMEOUT: Final = 60.0
#: Seconds an agent's ``events`` call waits for news before it returns empty.
EVENTS_WAIT: Final = 0.5
#: Ray addresses that could start a cluster or attach to one left over on this host.
AMBIGUOUS_ADDRESSES: Final = frozenset({"", "local", "auto"})
#: The label every phalanx node on Ray carries, with the Ray node id.
NODE_ID_LABEL: Final = "ray.io/node-id"


class AgentHandle:
    """A node agent's actor handle that presents the server's key with every call:
    ``handle.launch.remote(*args)`` is the agent's ``launch(key, *args)``."""

    __slots__ = ("_actor", "_key")

    def __init__(self, actor: Any, key: str) -> None:
        self._actor = actor
        self._key = key

    def __getattr__(self, method: str) -> _KeyedMethod:
        return _KeyedMethod(getattr(self._actor, method), self._key)


@dataclass(frozen=True, slots=True)
class _KeyedMethod:
    method: Any  # the actor method's handle
    key: str

    def remote(self, *args: Any) -> Any:
        return self.method.remote(self.key, *args)


@dataclass(slots=True)
class _Agent:
    handle: AgentHandle | None
    node: str
    pending: Any = None  # the outstanding ``events`` call
    records: list[ProcessRecord] = field(default_factory=list)


def check_address(address: str) -> None:
    """Raise ``InvalidInput`` for a Ray address that could start or attach the wrong
    cluster (``AMBIGUOUS_ADDRESSES``)."""
    if address.strip().lower() in AMBIGUOUS_ADDRESSES:
        raise InvalidInput(
            f"{address!r} would start a Ray cluster here or attach one left on this host",
            field="--ray-address",
            fix="give the head's address, host:port (as `ray start --head` printed it)",
        )


def connect(address: str, namespace: str) -> None:
    """Connect this process to the Ray cluster at ``address`` (once; again is a no-op).
    Raises ``InvalidInput`` for an address that could start or attach the wrong cluster."""
    check_address(address)
    import ray  # noqa: PLC0415  # the optional extra

    if not ray.is_initialized():
        ray.init(
            address=address, namespace=namespace, logging_level=logging.WARNING, log_to_driver=False
        )


class RayCluster:
    """Nodes and agents of one Ray cluster (see the module docstring).

    ``key`` is the server's secret, which its agents obey (kept in its data dir, handed
    to no one). ``agent_root`` is where on each node its agent keeps its data dir and tasks dir
    (``<agent_root>/<node>/data`` and ``.../tasks``), and the model versions it copied
    out (``.../models``) of the model store ``models`` (a path or URL every node reads). ``declared`` maps node names to a
    Cluster document's nodes (for GPUs a node's probe cannot see). Each agent reads its
    node's GPUs every ``gpu_interval`` seconds (None: never), as set when it starts. Call ``start`` once,
    ``close`` at the end; ``state``, ``take`` and ``agent`` may be called from any thread.
    """

    def __init__(
        self,
        *,
        namespace: str,
        key: str,
        agent_root: Path,
        per_user: bool = False,
        limits: LimitDefaults | None = None,
        colocation: float | None = None,
        models: str | None = None,
        data_quota: int = 64 << 30,
        gpu_interval: float | None = DEFAULT_INTERVAL,
        declared: Mapping[str, Node] | None = None,
        refresh: float = REFRESH,
        on_change: Callable[[], object] | None = None,
        on_news: Callable[[], object] | None = None,
    ) -> None:
        self.namespace = namespace
        self._key = key
        self.agent_root = agent_root
        self._per_user = per_user
        self._limits = limits
        self._colocation = colocation
        self._models = models
        self._data_quota = data_quota
        self._gpu_interval = gpu_interval
        self._declared = dict(declared or {})
        self._refresh = refresh
        self._on_change = on_change
        self._on_news = on_news
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # one reader of the node table at a time
        self._state = NodeState()
        self._ids: dict[str, str] = {}  # node name -> Ray node id it was probed with
        self._refusals: set[str] = set()  # Ray node ids whose agent refused the key (said)
        self._agents: dict[str, _Agent] = {}
        self._reports: list[tuple[str, Report]] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- reading -------------------------------------------------------------------------

    @property
    def state(self) -> NodeState:
        """The nodes as last read (replaced whole on each change: no lock needed)."""
        return self._state

    def agent(self, node: str) -> AgentHandle:
        """The handle of ``node``'s agent (with the key). Raises ``KeyError`` for a node without
        one (never seen, or its agent died and has no successor yet)."""
        with self._lock:
            handle = self._agents[node].handle
        if handle is None:
            raise KeyError(node)
        return handle

    def with_agents(self) -> set[str]:
        """The nodes whose agent lives (as far as this server has heard)."""
        with self._lock:
            return {node for node, agent in self._agents.items() if agent.handle is not None}

    def ask(self, nodes: Iterable[str], method: str, *args: Any, timeout: float) -> dict[str, Any]:
        """Each of ``nodes``' agents' answer to ``method(*args)``, asked of all at once,
        by node; a node whose agent cannot answer within ``timeout`` seconds (it has
        none, it died, or the call raised) is left out."""
        import ray  # noqa: PLC0415

        calls = {}
        for node in nodes:
            with contextlib.suppress(KeyError):  # no agent: that node cannot answer
                calls[node] = getattr(self.agent(node), method).remote(*args)
        answers = {}
        deadline = time.monotonic() + timeout
        for node, call in calls.items():
            with contextlib.suppress(ray.exceptions.RayError):
                answers[node] = ray.get(call, timeout=max(0.0, deadline - time.monotonic()))
        return answers

    def records(self) -> dict[str, list[ProcessRecord]]:
        """Each node's records as its live agent last reported them."""
        with self._lock:
            return {
                node: list(agent.records)
                for node, agent in self._agents.items()
                if agent.handle is not None
            }

    def take(self) -> list[tuple[str, Report]]:
        """Every report the pump queued since the last call, with its node, in order."""
        with self._lock:
            taken, self._reports = self._reports, []
            return taken

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        """Read the nodes and make their agents now; then watch and pump on threads."""
        self._refresh_nodes()
        for target, name in ((self._watch, "ray-nodes"), (self._pump, "ray-pump")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """Stop watching and pumping. The agents and their tasks run on (detached)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(5 * (EVENTS_WAIT + self._refresh))

    def _watch(self) -> None:
        while not self._stop.wait(self._refresh):
            try:
                self._refresh_nodes()
            except Exception:  # anything (the GCS briefly away, say): this thread lives on
                log.exception("cannot read the Ray cluster's nodes; trying again")

    def _refresh_nodes(self) -> None:
        with self._refreshing:
            self._read_nodes()

    def _read_nodes(self) -> None:
        import ray  # noqa: PLC0415

        table: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        infos = {node_name(str(i["NodeManagerAddress"])): i for i in table if i.get("Alive")}
        ids = {name: str(info["NodeID"]) for name, info in infos.items()}
        state = self._state
        nodes = {node.name: node for node in state.nodes}
        joined = self._join([infos[n] for n in sorted(infos) if self._ids.get(n) != ids[n]])
        for node in joined:
            nodes[node.name] = node
            self._ids[node.name] = ids[node.name]
        alive = frozenset(n for n in infos if n in nodes and n not in self._dead_agents())
        if alive == state.alive and not joined:
            return
        self._state = replace(
            state, nodes=tuple(nodes.values()), alive=alive, version=state.version + 1
        )
        for name in sorted(state.alive - alive):
            log.warning("Ray node %s is gone: its tasks are lost", name)
        if self._on_change is not None:
            self._on_change()

    def _dead_agents(self) -> set[str]:
        with self._lock:
            return {node for node, agent in self._agents.items() if agent.handle is None}

    def _join(self, infos: list[dict[str, Any]]) -> list[Node]:
        """The nodes of ``infos`` (entries of ``ray.nodes()``) whose agent answers, each
        as its agent probed it. Each node's agent is found by name and handed this
        server's settings (``NodeAgent.configure``: its tasks go on), or started there;
        all in one round of calls. A node whose agent does not answer in time is left
        for the next round; one whose agent refuses the key, left out (said once)."""
        import ray  # noqa: PLC0415

        calls = []
        for info in infos:
            name = node_name(str(info["NodeManagerAddress"]))
            settings = AgentSettings(
                node=name,
                address=str(info["NodeManagerAddress"]),
                data_dir=self.agent_root / name / "data",
                tasks_dir=self.agent_root / name / "tasks",
                per_user=self._per_user,
                limits=self._limits,
                colocation=self._colocation,
                models=self._models,
                data_quota=self._data_quota,
                gpu_interval=self._gpu_interval,
            )
            agent = AgentHandle(self._actor(settings, str(info["NodeID"])), self._key)
            calls.append((info, agent, agent.configure.remote(settings), agent.probe.remote()))
        deadline = time.monotonic() + AGENT_START_TIMEOUT
        joined = []
        for info, agent, configured, probed in calls:
            name, node_id = node_name(str(info["NodeManagerAddress"])), str(info["NodeID"])
            try:
                kept: str = ray.get(configured, timeout=max(0.0, deadline - time.monotonic()))
                seen: Probe = ray.get(probed, timeout=max(0.0, deadline - time.monotonic()))
            except AgentRefused as refused:
                if node_id not in self._refusals:
                    self._refusals.add(node_id)
                    log.error(
                        "Ray node %s is left out: %s. Its agent (%s in namespace %s) serves "
                        "another server, or this data dir's before its key was lost; once "
                        "its tasks may die, ray.kill it and this server makes its own",
                        name, refused, agent_name(name), self.namespace,
                    )  # fmt: skip
                continue
            except ray.exceptions.RayError as error:  # not up yet, or the node died meanwhile
                log.info("the agent of Ray node %s did not answer: %s", name, error)
                continue
            if kept:
                log.warning("%s", kept)
            joined.append(probed_node(info, seen, self._declared.get(name)))
            with self._lock:
                previous = self._agents.get(name)
                records = previous.records if previous is not None else []
                self._agents[name] = _Agent(handle=agent, node=name, records=records)
            if records:  # a replacement: take over what its predecessor ran
                agent.adopt.remote(records, time.time())
        return joined

    def _actor(self, settings: AgentSettings, node_id: str) -> Any:
        """The actor of the agent of ``settings.node``, found by name or started on Ray
        node ``node_id`` (without waiting for it)."""
        import ray  # noqa: PLC0415
        from ray.util.scheduling_strategies import (  # noqa: PLC0415
            NodeAffinitySchedulingStrategy,
        )

        name = agent_name(settings.node)
        try:
            return ray.get_actor(name, namespace=self.namespace)
        except ValueError:  # none yet
            return (
                ray.remote(NodeAgent)
                .options(
                    name=name,
                    namespace=self.namespace,
                    lifetime="detached",
                    get_if_exists=True,
                    num_cpus=0,
                    num_gpus=0,
                    max_concurrency=AGENT_CONCURRENCY,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
                )
                .remote(settings, key_digest(self._key))
            )

    def _pump(self) -> None:
        import ray  # noqa: PLC0415

        while not self._stop.is_set():
            with self._lock:
                agents = [a for a in self._agents.values() if a.handle is not None]
                for agent in agents:
                    if agent.pending is None and agent.handle is not None:
                        agent.pending = agent.handle.events.remote(EVENTS_WAIT)
                pending = {agent.pending: agent for agent in agents}
            if not pending:
                self._stop.wait(EVENTS_WAIT)
                continue
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=2 * EVENTS_WAIT)
            news = False
            for reference in ready:
                agent = pending[reference]
                try:
                    report: Report = ray.get(reference)
                except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as error:
                    self._agent_died(agent, error)
                    news = True
                    continue
                with self._lock:
                    agent.pending = None
                    agent.records = report.records
                    if report.events or report.gpus:  # GPU readings wait for the next tick
                        self._reports.append((agent.node, report))
                        news = news or bool(report.events)
                self._note_held(agent.node, report.datasets)
            if news and self._on_news is not None:
                self._on_news()

    def _note_held(self, node: str, held: frozenset[str]) -> None:
        """Take in what ``node``'s dataset cache holds, as its agent reported it."""
        with self._refreshing:
            state = self._state
            if state.datasets.get(node, frozenset()) == held:
                return
            datasets = {**state.datasets, node: held}
            self._state = replace(state, datasets=datasets, version=state.version + 1)
        if self._on_change is not None:
            self._on_change()

    def _agent_died(self, agent: _Agent, error: Exception) -> None:
        log.warning("the agent of Ray node %s died: %s", agent.node, error)
        with self._lock:
            agent.handle = agent.pending = None
        self._ids.pop(agent.node, None)  # re-probed, and a new agent made, if it lives
        with contextlib.suppress(Exception):
            self._refresh_nodes()
