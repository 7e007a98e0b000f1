"""The Ray executor: the engine's decisions carried out on the nodes of a Ray cluster.

It implements ``Executor``, ``Recoverable``, ``LogSource`` and ``NodeSource``
(``executors.base``). Ray runs no task itself: each node's agent (``agent``), a detached
actor pinned to the node, starts that node's tasks as the local executor would, so
identities, limits, records and logs are the same on every node. This side plans each
gang's rendezvous across nodes (``gangs.GangPlanner``: ports asked of the node that
uses them, ``MASTER_ADDR`` the rank-0 task's node's address), sends every node its
part, and turns what the agents report into the lifecycle's events.

- ``start`` returns once every agent concerned has launched its part; STARTED and
  FAILED_TO_START come back through ``poll``, as every later event does.
- A job bound to a live node whose agent is being replaced waits, as a pod bound to a
  node whose kubelet restarts does: its whole gang starts at the first ``poll`` that
  finds every one of its nodes with an agent (nothing ran, so it costs no retry); a
  stop of a waiting task ends it at once, and one whose node dies meanwhile is LOST.
- An agent's event of a task this executor did not start or adopt is dropped (it
  predates a restart: adopting the task's record reports its end again), and such a
  task still running on a node is killed: no job holds it any more.
- A task whose node Ray declares dead is LOST at the next ``poll`` that sees it (how
  soon: ``cluster``'s docstring); so is a task whose node is gone when it was to start
  or be adopted.
- A stop is SIGTERM on the node, then SIGKILL after the grace, by the agent: phalanx
  records why it stopped (the lifecycle knows it asked), whatever code the task left.
- Logs are read on the node where the task last ran, on demand; a task whose node is
  dead has empty logs until the node returns.

Not thread-safe, like the local executor: the controller's thread calls it; ``logs``,
``address_of`` and ``node_state`` excepted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from phalanx.domain.errors import InvalidInput
from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import (
    Executor,
    LogAbsence,
    LogSource,
    LogStream,
    NodeSource,
    NodeState,
    Recoverable,
    TaskEvent,
    TaskEventKind,
)
from phalanx.executors.failures import failed_to_start, stopped_before_start
from phalanx.executors.gangs import GangPlanner, PlannedStart
from phalanx.executors.launch import TaskLaunch, check_directory_names
from phalanx.executors.ray.cluster import RayCluster
from phalanx.executors.records import ProcessRecord
from phalanx.executors.rendezvous import Placement
from phalanx.telemetry.readings import NodeSample

log = logging.getLogger(__name__)

#: How long a call that must be answered (ports, launches, adoption) waits for an agent.
AGENT_TIMEOUT: Final = 60.0

Key = tuple[str, str]  # (job, task)


def node_gone(node: str) -> str:
    """The message of a task LOST with its Ray node."""
    return f"its Ray node {node} is gone (Ray's health check declared it dead)"


@dataclass(slots=True, kw_only=True)
class _Task:
    """A task started or adopted on a node, until it ends."""

    node: str
    slot: tuple[str, int] | None  # None when adopted: its place in the gang is unknown
    placement: Placement | None


class RayExecutor:
    """Runs bound tasks on the nodes of ``cluster`` (see the module docstring).

    ``resolve`` turns a ``Bind`` into a ``TaskLaunch`` (the controller knows the spec);
    ``cluster`` must be started. ``clock`` must tell the controller's time."""

    def __init__(
        self,
        cluster: RayCluster,
        resolve: Callable[[Bind], TaskLaunch],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cluster = cluster
        self._resolve = resolve
        self._clock = clock
        self._gangs = GangPlanner(address_of=self.address_of, free_ports=self._free_ports)
        self._tasks: dict[Key, _Task] = {}
        self._last_node: dict[Key, str] = {}  # where each task last ran: its logs are there
        #: Binds of jobs with a node whose agent is being replaced, by job and task.
        self._waiting: dict[str, dict[str, Bind]] = {}
        self._events: list[TaskEvent] = []
        self._gpu_samples: list[NodeSample] = []  # the agents' GPU readings, for the controller

    # -- the Executor protocol ---------------------------------------------------------

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        """Plan and launch every bound task not started yet (see the module docstring).
        Never raises for a bad task or job: its trouble is its FAILED_TO_START."""
        import ray  # noqa: PLC0415  # the optional extra

        by_job: dict[str, dict[str, Bind]] = {}
        for bind in binds:
            if (bind.job, bind.task) not in self._tasks:
                by_job.setdefault(bind.job, {}).setdefault(bind.task, bind)
        by_node: dict[str, list[PlannedStart]] = {}
        alive, agents = self._cluster.state.alive, self._cluster.with_agents()
        for job, bound in by_job.items():
            group = {**self._waiting.pop(job, {}), **bound}
            if not self._nodes_ready(job, group, alive, agents, now):
                continue
            try:
                launches = [self._resolve(bind) for bind in group.values()]
                planned = self._gangs.plan(job, launches, self._placements(job))
            # Anything resolve (the caller's code) or the rendezvous raises is this job's
            # failure to start, never the executor's: ``start`` never raises for a job.
            except Exception as error:
                self._forget_if_idle(job)
                for bind in group.values():
                    self._failed(
                        bind.job, bind.task, bind.node, now, f"cannot plan its start: {error}"
                    )
                continue
            for start in planned:
                launch = start.launch
                self._tasks[launch.job, launch.task] = _Task(
                    node=launch.node,
                    slot=(launch.role, launch.index),
                    placement=start.placement,
                )
                self._last_node[launch.job, launch.task] = launch.node
                by_node.setdefault(launch.node, []).append(start)
        calls = []
        for node, starts in by_node.items():
            try:
                calls.append((node, starts, self._cluster.agent(node).launch.remote(starts, now)))
            except KeyError:
                self._cannot_launch(starts, now, f"the node {node} has no agent (is it alive?)")
        for node, starts, call in calls:
            try:
                ray.get(call, timeout=AGENT_TIMEOUT)
            except ray.exceptions.RayError as error:  # it died, timed out, or raised
                self._cannot_launch(starts, now, f"the agent of node {node} failed: {error}")

    def stop(self, evictions: Sequence[Evict], *, now: float, grace: float) -> None:
        """Ask each task's agent to stop it (SIGTERM, SIGKILL ``grace`` seconds after
        ``now``); a task still waiting for its node's agent has stopped at once; unknown
        tasks are ignored, and a dead node's are LOST anyway."""
        by_node: dict[str, list[Evict]] = {}
        for eviction in evictions:
            waiting = self._waiting.get(eviction.job, {})
            if waiting.pop(eviction.task, None) is not None:
                self._events.append(
                    stopped_before_start(
                        eviction.job,
                        eviction.task,
                        eviction.node,
                        now,
                        "its node's agent was being replaced",
                    )
                )
                if not waiting:
                    del self._waiting[eviction.job]
                continue
            task = self._tasks.get((eviction.job, eviction.task))
            if task is not None:
                by_node.setdefault(task.node, []).append(eviction)
        for node, stops in by_node.items():
            try:
                self._cluster.agent(node).stop.remote(stops, now, grace)
            except KeyError:
                continue  # no agent: its node is dead or its agent is being replaced

    def poll(self, *, now: float) -> list[TaskEvent]:
        """The agents' events, and LOST for each task of a node no longer alive; each
        reported once, oldest first, none later than ``now``. Jobs waiting for their
        nodes' agents start here once they all have one."""
        if self._waiting:
            self.start(
                [bind for group in self._waiting.values() for bind in group.values()], now=now
            )
        for node, records in self._cluster.records().items():
            self._stop_strays(node, records, now)
        for _, report in self._cluster.take():
            self._gpu_samples += report.gpus
            for event in report.events:
                key = (event.job, event.task)
                if key not in self._tasks:
                    continue  # not started here since this server began: adoption tells
                if event.kind is not TaskEventKind.STARTED:
                    self._drop(key)
                self._events.append(replace(event, time=min(event.time, now)))
        alive = self._cluster.state.alive
        for key, task in list(self._tasks.items()):
            if task.node not in alive:
                self._events.append(
                    TaskEvent(
                        kind=TaskEventKind.LOST,
                        time=now,
                        job=key[0],
                        task=key[1],
                        node=task.node,
                        message=node_gone(task.node),
                    )
                )
                self._drop(key)
        due, self._events = sorted(self._events, key=lambda event: event.time), []
        return due

    def gpu_samples(self) -> list[NodeSample]:
        """The readings of the nodes' GPUs the agents reported since the last call
        (``GpuSource``), as ``poll`` took them, oldest first by node."""
        samples, self._gpu_samples = self._gpu_samples, []
        return samples

    def _stop_strays(self, node: str, records: Sequence[ProcessRecord], now: float) -> None:
        """Kill what an agent runs that this server neither started nor adopted: a task
        of an attempt the lifecycle has given up on (its start was under way as the
        previous server died). ``adopt`` has run by the first ``poll``."""
        strays = [
            Evict(
                job=record.job,
                task=record.task,
                node=node,
                action="stray",
                by=record.job,
                reason="not a task of this server",
            )
            for record in records
            if (record.job, record.task) not in self._tasks
        ]
        if strays:
            log.warning("stopping %d task(s) on %s that no job holds", len(strays), node)
            self._kill_on(node, strays, now=now)

    def _kill_on(self, node: str, evictions: Sequence[Evict], *, now: float) -> None:
        """SIGKILL ``evictions`` on ``node`` now (no grace)."""
        try:
            self._cluster.agent(node).stop.remote(list(evictions), now, 0.0)
        except KeyError:
            return  # no agent: nothing runs there that could be stopped

    # -- crash safety --------------------------------------------------------------------

    def records(self) -> list[ProcessRecord]:
        """One record per live task, as the agents last reported them."""
        return [
            record
            for node_records in self._cluster.records().values()
            for record in node_records
            if (record.job, record.task) in self._tasks
        ]

    def recorded(self, job: str, task: str) -> ProcessRecord | None:
        """The record the task's last start left on its node, if any node has one."""
        last = self._last_node.get((job, task))
        nodes = [last] if last is not None else [n.name for n in self._cluster.state.nodes]
        answers = self._cluster.ask(nodes, "recorded", job, task, timeout=AGENT_TIMEOUT)
        return next((found for found in answers.values() if found is not None), None)

    def adopt(self, records: Iterable[ProcessRecord], *, now: float) -> None:
        """Hand each record to its node's agent, which re-attaches the task (or reports
        how it ended); a record whose node is gone is LOST."""
        import ray  # noqa: PLC0415

        by_node: dict[str, list[ProcessRecord]] = {}
        for record in records:
            if (record.job, record.task) not in self._tasks:
                by_node.setdefault(record.node, []).append(record)
        for node, found in by_node.items():
            try:
                if node not in self._cluster.state.alive:
                    raise KeyError(node)
                ray.get(self._cluster.agent(node).adopt.remote(found, now), timeout=AGENT_TIMEOUT)
            except (KeyError, ray.exceptions.RayError):  # no agent, or it could not adopt
                for record in found:
                    self._events.append(
                        TaskEvent(
                            kind=TaskEventKind.LOST,
                            time=now,
                            job=record.job,
                            task=record.task,
                            node=node,
                            message=node_gone(node),
                        )
                    )
                continue
            for record in found:
                self._tasks[record.job, record.task] = _Task(node=node, slot=None, placement=None)
                self._last_node[record.job, record.task] = node

    # -- nodes, addresses, logs --------------------------------------------------------

    def node_state(self) -> NodeState:
        """The cluster's nodes as last read."""
        return self._cluster.state

    def address_of(self, node: str, declared: str | None) -> str:
        """Where peers reach a task on ``node``: its Ray address. Raises ``InvalidInput``
        for a node the cluster does not have."""
        if declared:
            return declared
        for known in self._cluster.state.nodes:
            if known.name == node and known.address:
                return known.address
        raise InvalidInput(
            f"{node} is not a node of the Ray cluster",
            field="node",
            fix="bind tasks to nodes of the Ray cluster (phalanx get nodes)",
        )

    def logs(self, job: str, task: str, stream: LogStream) -> RayTaskLog:
        """The task's ``stream`` on the node where it last ran (found by asking the
        agents after a restart). Raises ``InvalidInput`` for a name that cannot name a
        task directory."""
        check_directory_names(job, task)
        return RayTaskLog(self._cluster, self._last_node.get((job, task)), job, task, stream)

    def progress(self, job: str, task: str, limit: int) -> tuple[int, bytes] | None:
        """The task's progress report (``ProgressSource``), read by the agent of the node it
        last ran on; None when it wrote none or that agent cannot answer now."""
        import ray  # noqa: PLC0415

        node = self._last_node.get((job, task))
        if node is None:
            return None
        try:
            agent = self._cluster.agent(node)
            found = ray.get(agent.progress.remote(job, task, limit), timeout=AGENT_TIMEOUT)
        except (KeyError, ray.exceptions.RayError):  # no agent, or it died: nothing to read
            return None
        return None if found is None else (int(found[0]), bytes(found[1]))

    def close(self) -> None:
        """Stop following the cluster; the agents and their tasks run on."""
        self._cluster.close()

    # -- internals -----------------------------------------------------------------------

    def _nodes_ready(
        self,
        job: str,
        group: dict[str, Bind],
        alive: frozenset[str],
        agents: set[str],
        now: float,
    ) -> bool:
        """True when every node of ``group`` (a job's binds) is among ``agents`` (those
        with an agent). Else the job waits (``_waiting``) while those nodes are
        ``alive``, and its binds on a node that died are LOST (the rest wait: the
        lifecycle stops them as it restarts the gang)."""
        gone = {bind.task for bind in group.values() if bind.node not in alive}
        for task in sorted(gone):
            bind = group.pop(task)
            self._events.append(
                TaskEvent(
                    kind=TaskEventKind.LOST,
                    time=now,
                    job=job,
                    task=task,
                    node=bind.node,
                    message=node_gone(bind.node),
                )
            )
        missing = sorted({bind.node for bind in group.values()} - agents)
        if not missing and not gone:
            return True
        if group:
            if job not in self._waiting:
                log.info("job %s waits for the agents of %s", job, ", ".join(missing))
            self._waiting[job] = group
        return False

    def _free_ports(self, node: str, count: int) -> Sequence[int]:
        import ray  # noqa: PLC0415

        try:
            agent = self._cluster.agent(node)
        except KeyError:
            raise InvalidInput(
                f"the node {node} has no agent",
                field="node",
                fix="wait for the node to join the Ray cluster again",
            ) from None
        ports: Sequence[int] = ray.get(agent.free_ports.remote(count), timeout=AGENT_TIMEOUT)
        return ports

    def _placements(self, job: str) -> dict[tuple[str, int], Placement]:
        return {
            task.slot: task.placement
            for (name, _), task in self._tasks.items()
            if name == job and task.slot is not None and task.placement is not None
        }

    def _drop(self, key: Key) -> None:
        if self._tasks.pop(key, None) is not None:
            self._forget_if_idle(key[0])

    def _forget_if_idle(self, job: str) -> None:
        if not any(name == job for name, _ in self._tasks):
            self._gangs.forget(job)

    def _cannot_launch(self, starts: Sequence[PlannedStart], now: float, message: str) -> None:
        for start in starts:
            launch = start.launch
            self._drop((launch.job, launch.task))
            self._failed(launch.job, launch.task, launch.node, now, message)

    def _failed(self, job: str, task: str, node: str, now: float, message: str) -> None:
        log.warning("cannot start %s of %s on %s: %s", task, job, node, message)
        self._events.append(failed_to_start(job, task, node, now, message))


class RayTaskLog:
    """One output stream of one task, read from its node's agent (``TaskLog``).

    With no known node (a server restarted since the task ran) the first call asks every
    agent which one ran it. A stream on a node without an agent reads as empty."""

    def __init__(
        self, cluster: RayCluster, node: str | None, job: str, task: str, stream: LogStream
    ) -> None:
        self._cluster = cluster
        self._node = node
        self._args = (job, task, stream)

    def size(self) -> int:
        """How many bytes the stream holds now (0 when its node cannot be reached)."""
        found = self._call("log_size", *self._args)
        return int(found) if found is not None else 0

    def read(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset``. Raises ``InvalidInput`` for a negative
        offset or limit."""
        if offset < 0 or limit < 0:
            raise InvalidInput(
                f"offset {offset}, limit {limit}", field="offset", fix="give 0 or more for both"
            )
        found = self._call("log_read", *self._args, offset, limit)
        return bytes(found) if found is not None else b""

    def absent(self) -> LogAbsence | None:
        """None when the stream is there on its node; otherwise why not: the node's
        agent's answer (``FileLog.absent`` there), or that no agent could be asked."""
        job, task, _ = self._args
        found = self._call("log_absent", *self._args)
        if isinstance(found, LogAbsence):
            return found
        if found is None and self._node is None:  # ``_call`` asked every agent: none ran it
            return LogAbsence(
                reason=f"no node's agent has a directory for task {task} of job {job}",
                fix="the node it ran on may have left the Ray cluster; bring it back to read "
                "its log",
            )
        if found is None:
            return LogAbsence(
                reason=f"the agent of node {self._node}, where task {task} ran, did not answer",
                fix="see that the node is alive (phalanx get nodes), then ask again",
            )
        return None

    def _call(self, method: str, *args: Any) -> Any:
        import ray  # noqa: PLC0415

        node = self._node or self._find()
        if node is None:
            return None
        try:
            agent = self._cluster.agent(node)
            return ray.get(getattr(agent, method).remote(*args), timeout=AGENT_TIMEOUT)
        except (KeyError, ray.exceptions.RayError):  # no agent, or it died: nothing to read
            return None

    def _find(self) -> str | None:
        job, task, _ = self._args
        alive = self._cluster.state.alive
        answers = self._cluster.ask(alive, "ran", job, task, timeout=AGENT_TIMEOUT)
        self._node = next((node for node, ran in sorted(answers.items()) if ran), None)
        return self._node


if TYPE_CHECKING:
    _CONFORMS: type[Executor] = RayExecutor
    _RECOVERS: type[Recoverable] = RayExecutor
    _SERVES_LOGS: type[LogSource] = RayExecutor
    _HAS_NODES: type[NodeSource] = RayExecutor
