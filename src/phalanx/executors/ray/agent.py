"""The node agent: one detached Ray actor on each node, which runs that node's tasks.

It holds a ``LocalExecutor`` whose host is its node: the tasks are processes of that
node, started by its launcher, under the same identities, limits, records and logs as
on a single host (``executors.local``). What crosses the network is small: planned
starts, stop requests, events, records, and log chunks read on demand.

Guarantees:

- it runs on its node (hard node affinity) and asks Ray for no CPU and no GPU: phalanx
  accounts for the node's resources itself, and Ray never sets a task's
  ``CUDA_VISIBLE_DEVICES`` (the environment the executor builds does);
- it is detached, named ``agent_name(node)`` in the server's Ray namespace: it outlives
  the server, and a restarted server finds it, its live tasks and its unreported
  events by that name (``RayCluster``), and hands it its own settings (``configure``:
  identities and limits apply from the next start; no task is stopped). Its data dir
  holds the task records on the node, so a replacement agent re-adopts the tasks of
  one that died;
- ``events`` waits at most ``wait`` seconds and returns what happened since the last
  call, with the node's records; stop deadlines are enforced while someone calls it
  (the server's pump does, continuously);
- its tasks die with it (``LocalExecutor``'s ``tasks_die_with_it``): when the node's
  Ray dies, so do they, as Ray's own workers do, and none runs on unseen after phalanx
  reported it LOST and started its gang elsewhere;
- it obeys its server alone: it is made with the digest of the server's key
  (``key_digest``; the key itself lives in the server's data dir, never in Ray), and
  every call must present the key as its first argument, or is refused with
  ``AgentRefused`` before it does anything. Ray's token authentication keeps everyone
  else off the cluster; the key keeps a caller that has Ray's token (a driver on any
  node, a task run as Ray's user) from commanding the agent;
- every call is serialised on one lock (the executor is not thread-safe); ``events``
  waits outside it;
- a start that reads a model version (``TaskLaunch.model_digest``) or datasets
  (``TaskLaunch.dataset_copies``) not yet on the node returns at once and starts once
  each is copied onto the node, on a thread of its own: the version out of the model
  store (``AgentSettings.models``) into the node's ``ModelCache``, each dataset from
  its source into the node's ``DatasetCache`` (``data.copies``), each whole and
  verified, or not at all; one that cannot be copied fails the start naming it and why
  (retriable when the store, the source or the room failed, not the data); a stop of a
  start still waiting ends it there (it never ran). ``intake`` copies a task's model
  directory on the node into the store, as the registrar does on the server's host;
- the datasets a start reads are pinned in the node's cache from its launch until the
  task is no longer live here, so no fill evicts what a task reads; what the cache
  holds whole goes with every report (``Report.datasets``); ``warm`` fills it;
- it reads the node's GPUs on its ``events`` calls, every ``gpu_interval`` seconds
  (``executors.gpuwatch``), and hands the readings on with the next report; a node
  without NVML says so once.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Concatenate, Final, ParamSpec, TypeVar

from phalanx.data.cache import CacheLimits, DatasetCache
from phalanx.data.copies import CopyFailed, DatasetCopy
from phalanx.domain.errors import ContentError, InvalidInput, RequestRefused
from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import LogAbsence, LogStream, TaskEvent
from phalanx.executors.colocation import OfflineThrottle
from phalanx.executors.failures import failed_to_start, stopped_before_start
from phalanx.executors.gangs import PlannedStart
from phalanx.executors.gpuwatch import GpuWatch
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.local import LocalExecutor
from phalanx.executors.process import dir_name
from phalanx.executors.ray.nodes import Probe, probe
from phalanx.executors.records import ProcessRecord
from phalanx.executors.rendezvous import free_ports
from phalanx.executors.taskgroups import LimitDefaults
from phalanx.models.cache import ModelCache
from phalanx.models.manifest import Manifest
from phalanx.models.store import ModelStore
from phalanx.telemetry.readings import NodeSample
from phalanx.telemetry.sampler import DEFAULT_INTERVAL, GpuSampler
from phalanx.tenantfs import Limits, Place

#: The prefix of every agent's actor name (then the node's name).
AGENT_PREFIX: Final = "phalanx-agent-"
#: Concurrent calls an agent takes: a waiting ``events``, starts, stops, log reads.
AGENT_CONCURRENCY: Final = 16
#: Model versions an agent copies out at once.
FETCHES: Final = 2


def agent_name(node: str) -> str:
    """The Ray actor name of ``node``'s agent."""
    return AGENT_PREFIX + node


def key_digest(key: str) -> str:
    """What an agent keeps of its server's key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode()).hexdigest()


log = logging.getLogger(__name__)


class AgentRefused(RequestRefused):
    """A call to an agent that did not present its server's key."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _obeys(
    method: Callable[Concatenate[NodeAgent, _P], _R],
) -> Callable[Concatenate[NodeAgent, str, _P], _R]:
    """``method``, callable only with the server's key before its own arguments."""

    @functools.wraps(method)
    def guarded(agent: NodeAgent, key: str, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not hmac.compare_digest(key_digest(str(key)), agent.digest):
            raise AgentRefused(
                f"the agent of {agent.settings.node} obeys its server alone: "
                f"{method.__name__} was called without that server's key"
            )
        return method(agent, *args, **kwargs)

    # Ray reads a method's signature (following ``__wrapped__``) to check each call's
    # arguments: it must see the key's parameter.
    del guarded.__wrapped__
    return guarded


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """How an agent runs its node's tasks.

    ``data_dir`` (private: the records) and ``tasks_dir`` (every task's directory) are
    paths on the node; ``address`` is the node's, where its tasks' peers reach them.
    ``models`` is the model store (a path or fsspec URL, as the server's ``--models``)
    that versions are copied out of onto the node, beside ``tasks_dir`` (its
    ``models``), and that models its tasks write are registered into; None: none."""

    node: str
    address: str
    data_dir: Path
    tasks_dir: Path
    per_user: bool = False
    limits: LimitDefaults | None = None
    #: Offline tasks pause while online ones load the node over this share; None: never.
    colocation: float | None = None
    models: str | None = None
    #: Bytes the node's dataset cache (beside ``tasks_dir``: its ``datasets``) holds at most.
    data_quota: int = 64 << 30
    #: Seconds between readings of the node's GPUs (``phalanx.telemetry``); None: none.
    gpu_interval: float | None = DEFAULT_INTERVAL


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """What ``NodeAgent.events`` returns: the node's events, oldest first, a record of
    every task live on it now, the datasets its cache holds whole (digests), and the
    readings of its GPUs since the last report (``telemetry.readings``)."""

    events: list[TaskEvent]
    records: list[ProcessRecord]
    datasets: frozenset[str] = frozenset()
    gpus: list[NodeSample] = field(default_factory=list)


#: Why a start of a task still running on its node (from an earlier attempt) failed.
STALE_RUN: Final = (
    "the task still ran on its node from an earlier attempt (started as the server "
    "stopped): that process is killed, and the job starts again by its retry rules"
)


def _stale(launch: TaskLaunch) -> Evict:
    return Evict(
        job=launch.job,
        task=launch.task,
        node=launch.node,
        action="stale",
        by=launch.job,
        reason=STALE_RUN,
    )


def _planned_only(bind: Bind) -> TaskLaunch:
    raise InvalidInput(
        f"the agent of {bind.node} was asked to plan {bind.task} of {bind.job}",
        field="bind",
        fix="plan the rendezvous on the server and send the agent PlannedStarts",
    )


class NodeAgent:
    """The actor's class (see the module docstring); ``RayCluster`` makes it remote.
    ``digest`` is its server's ``key_digest``; every method but ``__init__`` takes the
    key first."""

    def __init__(self, settings: AgentSettings, digest: str) -> None:
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(settings.data_dir, 0o700)
        settings.tasks_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
        self.settings = settings
        self.digest = digest
        self._news = threading.Event()
        self._lock = threading.Lock()
        self._owed: list[TaskEvent] = []  # events of starts that never reached the executor
        self._models = None if settings.models is None else ModelStore(settings.models)
        self._model_cache = ModelCache(settings.tasks_dir.parent / "models")
        self._data_cache = DatasetCache(
            settings.tasks_dir.parent / "datasets", CacheLimits(quota=settings.data_quota)
        )
        self._data_cache.clean()  # what a killed agent left half filled
        self._fetching: dict[tuple[str, str], PlannedStart] = {}  # waiting for its inputs
        self._reads: dict[tuple[str, str], tuple[str, ...]] = {}  # datasets pinned, by task
        self._fetches = ThreadPoolExecutor(FETCHES, thread_name_prefix="phalanx-model-fetch")
        self._executor = LocalExecutor(
            settings.data_dir,
            _planned_only,
            host=settings.address,
            tasks_dir=settings.tasks_dir,
            per_user=settings.per_user,
            limits=settings.limits,
            on_events=self._news.set,
            tasks_die_with_it=True,
            gpus=_gpu_watch(settings),
        )
        self._throttle = _throttle(self._executor, settings.colocation)

    @_obeys
    def configure(self, settings: AgentSettings) -> str:
        """Run with ``settings`` (a restarted server's) from now on, without stopping a
        task: identities and limits apply to every start after this call. Directories
        and address are the agent's for life (its records live there): what it says
        when they differ, for the server to log; empty when all could be applied."""
        with self._lock:
            self._executor.reconfigure(per_user=settings.per_user, limits=settings.limits)
            if settings.models != self.settings.models:
                self._models = None if settings.models is None else ModelStore(settings.models)
            if settings.colocation != self.settings.colocation:
                if self._throttle is not None:  # what it paused runs again
                    for job, task in self._throttle.paused:
                        self._executor.resume(job, task)
                self._throttle = _throttle(self._executor, settings.colocation)
            kept = [
                f"{name} {getattr(self.settings, name)} (not {getattr(settings, name)})"
                for name in ("address", "data_dir", "tasks_dir")
                if getattr(self.settings, name) != getattr(settings, name)
            ]
            self.settings = replace(
                settings,
                address=self.settings.address,
                data_dir=self.settings.data_dir,
                tasks_dir=self.settings.tasks_dir,
            )
        if not kept:
            return ""
        return (
            f"the agent of {settings.node} keeps its " + ", ".join(kept) + ": its tasks' "
            "records live there; it takes the new ones once it is replaced (ray.kill it "
            "while it runs no task)"
        )

    @_obeys
    def probe(self) -> Probe:
        """What the node is (``nodes.probe``: its address as Ray sees it, its GPUs and
        container runtime), seen from here."""
        return probe()

    @_obeys
    def free_ports(self, count: int) -> tuple[int, ...]:
        """``count`` distinct ports free on the node's address a moment ago."""
        return free_ports(count, self.settings.address)

    @_obeys
    def launch(self, planned: Sequence[PlannedStart], now: float) -> None:
        """Start the planned tasks (``LocalExecutor.launch``); their STARTED or
        FAILED_TO_START come with the next ``events``.

        The server sends no start for a task it knows runs here, so a task still
        running here is left from an earlier attempt (started as a server died, say):
        it is killed, and this start is FAILED_TO_START, to be retried by the job's
        rules once the old process is gone, never silently taken for the new one."""
        with self._lock:
            live = {(task.job, task.task) for task in self._executor.running()}
            stale = [s.launch for s in planned if (s.launch.job, s.launch.task) in live]
            self._executor.stop([_stale(launch) for launch in stale], now=now, grace=0.0)
            for launch in stale:
                self._owed.append(
                    failed_to_start(launch.job, launch.task, launch.node, now, STALE_RUN)
                )
            fresh = [s for s in planned if (s.launch.job, s.launch.task) not in live]
            self._release_reads()
            ready: list[PlannedStart] = []
            for start in fresh:
                launch = start.launch
                digests = tuple(copy.digest for copy in launch.dataset_copies)
                for digest in digests:  # held from now: no fill evicts what it reads
                    self._data_cache.pin(digest)
                self._reads[launch.job, launch.task] = digests
                prepared = self._prepared(start)
                if prepared is not None:
                    ready.append(prepared)
                else:
                    self._fetching[launch.job, launch.task] = start
                    self._fetches.submit(self._fetch_then_start, start)
            self._executor.launch(ready, now=now)
        self._news.set()

    def _prepared(self, start: PlannedStart) -> PlannedStart | None:
        """``start`` reading its version and datasets where they are on this node, or
        None when one of them still has to be copied here."""
        launch = start.launch
        model = None
        if launch.model_digest is not None:
            path = self._model_cache.path(launch.model_digest)
            if not path.is_dir() or path.is_symlink():
                return None
            model = str(path)
        datasets = dict(launch.datasets)
        for copy in launch.dataset_copies:
            found = self._data_cache.lookup(copy.digest)
            if found is None:
                return None
            datasets[copy.name] = str(found)
        return replace(start, launch=replace(launch, model_path=model, datasets=datasets))

    def _fetch_then_start(self, start: PlannedStart) -> None:
        """Copy what ``start`` reads onto this node, then start it (unless it was
        stopped meanwhile); what cannot be copied fails the start, saying why."""
        launch = start.launch
        problem, retriable = self._copy_inputs(launch)
        now = time.time()
        with self._lock:
            if self._fetching.pop((launch.job, launch.task), None) is None:
                return  # stopped while it waited
            prepared = None if problem else self._prepared(start)
            if prepared is None:
                problem = problem or "a copy it reads was evicted as it landed; starting again"
                self._owed.append(
                    failed_to_start(
                        launch.job, launch.task, launch.node, now, problem, retriable=retriable
                    )
                )
            else:
                self._executor.launch([prepared], now=now)
        self._news.set()

    def _copy_inputs(self, launch: TaskLaunch) -> tuple[str, bool]:
        """Copy ``launch``'s version and datasets onto this node: why one could not be
        (empty: all are here), and whether trying again may help."""
        digest = launch.model_digest
        if digest is not None:
            problem, retriable = self._copy_model(digest)
            if problem:
                return (
                    f"its model version {digest} could not be copied to node "
                    f"{self.settings.node} from the model store {self.settings.models}: "
                    f"{problem}",
                    retriable,
                )
        for copy in launch.dataset_copies:
            try:
                copy.into(self._data_cache)
            except CopyFailed as error:
                return (
                    f"its dataset {copy.name} ({copy.digest}) could not be copied to node "
                    f"{self.settings.node}: {error}",
                    error.retriable,
                )
        return "", False

    def _copy_model(self, digest: str) -> tuple[str, bool]:
        """Copy version ``digest`` out of the model store: why it could not be (empty:
        it is here), and whether trying again may help."""
        try:
            if self._models is None:
                raise InvalidInput(
                    "no model store was given to this node's agent",
                    field="models",
                    fix="start the server with the model store it registers into",
                )
            self._model_cache.ensure(self._models, digest)
        except (InvalidInput, ContentError) as error:
            return str(error), False
        except OSError as error:  # the store could not be reached: worth another try
            return f"it could not be copied out: {error}", True
        except Exception as error:  # a remote store's own error (s3fs, a network)
            return f"it could not be copied out: {error!r}", True
        return "", False

    def _release_reads(self) -> None:
        """Unpin the datasets of the tasks no longer live here (nor waiting to start)."""
        live = {(task.job, task.task) for task in self._executor.running()}
        for key in [key for key in self._reads if key not in live and key not in self._fetching]:
            for digest in self._reads.pop(key):
                self._data_cache.unpin(digest)

    @_obeys
    def warm(self, copies: Sequence[DatasetCopy]) -> list[str]:
        """Copy ``copies`` into this node's dataset cache now (each that is not there
        yet); why each that could not be was not, naming it."""
        problems = []
        for copy in copies:
            try:
                copy.into(self._data_cache)
            except CopyFailed as error:
                problems.append(f"dataset {copy.name} ({copy.digest}): {error}")
        self._news.set()  # the next report says what the cache holds
        return problems

    @_obeys
    def collect_models(self, keep: Sequence[str]) -> int | None:
        """Remove the versions on this node not among the digests ``keep``; how many
        went, or None when a copy is under way (then nothing is removed: ask again)."""
        with self._lock:
            if self._fetching:
                return None
            return self._model_cache.collect(keep)

    @_obeys
    def intake(
        self, job: str, task: str, path: str, identity: TaskIdentity | None, limits: Limits
    ) -> Manifest:
        """Copy the directory ``path`` (relative to the working directory of ``task`` of
        ``job`` on this node) into the model store, read as ``identity`` would read it
        (``ModelStore.intake``: no link followed, within ``limits``); its manifest.
        Raises what that raises, and ``InvalidInput`` without a model store."""
        if self._models is None:
            raise InvalidInput(
                f"the agent of {self.settings.node} was given no model store",
                field="models",
                fix="start the server with the model store it registers into",
            )
        place = Place(self.settings.tasks_dir, f"{dir_name(job)}/{dir_name(task)}/{path}")
        reader = None if identity is None else identity.reader()
        return self._models.intake(place, reader=reader, limits=limits)

    @_obeys
    def stop(self, evictions: Sequence[Evict], now: float, grace: float) -> None:
        """SIGTERM now, SIGKILL ``grace`` seconds after ``now`` (``LocalExecutor.stop``);
        a start still waiting for its model version ends at once, never having run."""
        with self._lock:
            running = []
            for eviction in evictions:
                if self._fetching.pop((eviction.job, eviction.task), None) is None:
                    running.append(eviction)
                else:
                    self._owed.append(
                        stopped_before_start(
                            eviction.job,
                            eviction.task,
                            eviction.node,
                            now,
                            "what it reads was being copied to its node",
                        )
                    )
            self._executor.stop(running, now=now, grace=grace)
        self._news.set()

    @_obeys
    def events(self, wait: float) -> Report:
        """What happened since the last call, once there is news or ``wait`` seconds
        have passed; stop deadlines due by then are enforced first."""
        self._news.wait(wait)
        self._news.clear()
        with self._lock:
            if self._throttle is not None:
                try:
                    self._throttle.tick()
                except Exception:  # the load could not be read: tasks stay as they are
                    log.exception("colocation on %s failed this round", self.settings.node)
            events = [*self._owed, *self._executor.poll(now=time.time())]
            self._owed = []
            self._release_reads()
            return Report(
                events=events,
                records=self._executor.records(),
                datasets=self._data_cache.held(),
                gpus=self._executor.gpu_samples(),
            )

    @_obeys
    def adopt(self, records: Iterable[ProcessRecord], now: float) -> None:
        """Re-attach the recorded tasks of this node (``LocalExecutor.adopt``); those
        live here already are left alone, the others are reported by ``events``."""
        with self._lock:
            self._executor.adopt(records, now=now)
        self._news.set()

    @_obeys
    def recorded(self, job: str, task: str) -> ProcessRecord | None:
        """The record the task's last start on this node left, if any."""
        with self._lock:
            return self._executor.recorded(job, task)

    @_obeys
    def ran(self, job: str, task: str) -> bool:
        """True when the task has a directory on this node (it ran here)."""
        return self._executor.workdir(job, task).is_dir()

    @_obeys
    def log_size(self, job: str, task: str, stream: LogStream) -> int:
        """How many bytes the task's ``stream`` holds on this node."""
        return self._executor.logs(job, task, stream).size()

    @_obeys
    def log_read(self, job: str, task: str, stream: LogStream, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes of the task's ``stream`` from ``offset``."""
        return self._executor.logs(job, task, stream).read(offset, limit)

    @_obeys
    def log_absent(self, job: str, task: str, stream: LogStream) -> LogAbsence | bool:
        """Why the task's ``stream`` cannot be read on this node, or False when it can
        (``FileLog.absent``; never None, which the server reads as no answer)."""
        return self._executor.logs(job, task, stream).absent() or False

    @_obeys
    def progress(self, job: str, task: str, limit: int) -> tuple[int, bytes] | None:
        """The task's progress report on this node (``LocalExecutor.progress``)."""
        return self._executor.progress(job, task, limit)

    @_obeys
    def close(self) -> None:
        """Let go of the launcher and empty cgroup parents; the tasks keep running."""
        with self._lock:
            self._executor.close()
        self._fetches.shutdown(wait=False, cancel_futures=True)


def _gpu_watch(settings: AgentSettings) -> GpuWatch | None:
    """The readings of the node's GPUs, every ``settings.gpu_interval``; None: none."""
    if settings.gpu_interval is None:
        return None
    return GpuWatch(GpuSampler(settings.node, interval=settings.gpu_interval))


def _throttle(executor: LocalExecutor, watermark: float | None) -> OfflineThrottle | None:
    """The node's colocation throttle at ``watermark``, or None without one."""
    return None if watermark is None else OfflineThrottle(executor, watermark=watermark)
