"""``phalanx up`` in one process: the API, the controller and the local executor.

The data dir holds the SQLite database (unless ``db`` names another), the admin token,
the metrics token (``/metrics`` needs it, or an admin's token), the key that seals
users' secrets (``secrets.key``: ``control.secretbox``) and the records of the tasks'
processes; it is private to the server's user (mode 0700: see
``control.datadir``). The tasks dir holds every task's working directory and logs
(``control.tenancy.places``: inside the data dir, or beside it when tasks run as their
users' own uids). Starting again on the same data dir resumes: accepted jobs are all
there, live tasks are re-adopted.

At start the server says, at WARNING when it is less than full isolation, who tasks
run as (``control.tenancy``: per-user identities as root, else single-user mode or an
accepted shared identity) and how their CPU, memory and processes are limited
(``executors.cgroups``); ``describe node`` shows the same.

SIGINT and SIGTERM both stop the server in order (``Server.serve``): the API stops
taking requests and finishes those in flight, queued submissions are written, the
controller finishes its tick (a launch under way completes and is recorded), and the
database is closed. Running tasks are left alone; the next start adopts them.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import fsspec
import uvicorn

from phalanx.control.app import create_app
from phalanx.control.auth import AGENT_KEY_FILE, TokenCache, bootstrap_admin, kept_secret
from phalanx.control.controllers.colocate import Colocation
from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.core import Timing
from phalanx.control.controllers.data_inputs import DatasetInputs, SecretValues
from phalanx.control.controllers.datasets import DatasetLister
from phalanx.control.controllers.gateways import GatewayReports
from phalanx.control.controllers.intents import Intent
from phalanx.control.controllers.model_fetch import ModelFetcher
from phalanx.control.controllers.models import ModelRegistrar, Where
from phalanx.control.controllers.rollouts import RolloutDriver
from phalanx.control.controllers.serving import ReplicaGauge, Serving
from phalanx.control.controllers.tuning import Tuner
from phalanx.control.controllers.views import HostFacts
from phalanx.control.controllers.warming import DatasetWarmer, HostCache, NodeCaches
from phalanx.control.controllers.workflow import Workflows
from phalanx.control.datadir import prepare_data_dir
from phalanx.control.gateway import ServiceAccess
from phalanx.control.localhost import local_node
from phalanx.control.metrics import Metrics, metrics_token
from phalanx.control.secretbox import KEY_FILE, SecretBox
from phalanx.control.store import secrets as stored_secrets
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.tenancy import DEFAULT_TASK_UIDS, IdentityMode, Tenancy, UidRange
from phalanx.control.tenancy.modes import decide
from phalanx.control.tenancy.places import (
    check_tasks_dir,
    default_tasks_dir,
    open_tasks_dir,
)
from phalanx.control.throttle import Throttle, ThrottleSettings
from phalanx.data.cache import CacheLimits, DatasetCache
from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job
from phalanx.domain.node import Node
from phalanx.domain.prices import PriceSheet
from phalanx.engine.decisions import Bind
from phalanx.executors.cgroups import CGROUP_ROOT_ENV, GROUPED, Isolation, host_isolation
from phalanx.executors.containers.detect import detect_runtime
from phalanx.executors.gpuwatch import GpuWatch
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.local import LocalExecutor
from phalanx.executors.ray.data import NodeData
from phalanx.executors.ray.executor import RayExecutor
from phalanx.executors.ray.models import NodeModels
from phalanx.executors.taskgroups import LimitDefaults
from phalanx.gateway.proxy import Gateway
from phalanx.gateway.routes import Routes
from phalanx.gateway.tallies import Tallies, Tally
from phalanx.models.cache import ModelCache
from phalanx.models.store import ModelStore
from phalanx.policies import load_policy
from phalanx.spec import ClusterDocument, load_file
from phalanx.telemetry.sampler import DEFAULT_INTERVAL, GpuSampler
from phalanx.tuning.objective import Prices
from phalanx.web import close_console
from phalanx.workflow import Workspace
from phalanx.workflow.artifacts import check_shared, check_workspace

if TYPE_CHECKING:
    from phalanx.executors.ray.cluster import RayCluster

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """How to run the server."""

    data_dir: Path
    db_url: str | None = None  # default: SQLite in data_dir
    host: str = "127.0.0.1"
    port: int = 8080
    cluster: Path | None = None  # declared (virtual) nodes; default: this host
    scheduler: str = "phalanx-default"  # a shipped policy or a SchedulerConfig file
    timing: Timing = field(default_factory=Timing)
    tasks_dir: Path | None = None  # default: tenancy.places.default_tasks_dir
    shared_identity: bool = False  # every user's tasks run as the server (accepted)
    task_uids: UidRange = DEFAULT_TASK_UIDS  # uids allocated to users, with per-user identities
    root: bool | None = None  # act as a root server or not (None: whether this process is)
    executor: str = "local"  # "local" (this host) or "ray" (the nodes of a Ray cluster)
    ray_address: str | None = None  # with "ray": the head's host:port
    workspace: str | None = None  # runs' artifacts (a path or fsspec URL); default: see below
    models: str | None = None  # the model store (a path or fsspec URL); default: DATA_DIR/models
    data_cache_quota: int = 64 << 30  # bytes this host's dataset cache holds at most
    prices: Prices = field(default_factory=Prices)  # what right-sizing charges (phalanx tune)
    price_sheet: PriceSheet = field(default_factory=PriceSheet)  # what usage reports charge
    reports: Path | None = None  # a folder of simulator reports served at /api/v1/reports
    # Unknown or invalid tokens per client address: lock-outs after a few (docs/auth.md).
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)
    # Offline tasks pause while online ones load a host over this share (0..1) of it
    # (phalanx up: 0.7); None: never.
    colocation: float | None = None
    # Seconds between readings of the GPUs (phalanx.telemetry): of this host, when it is
    # the server's one node, or of each Ray node by its agent (set as it starts); None: never.
    gpu_interval: float | None = DEFAULT_INTERVAL
    # The NVML those readings go through (a pynvml-like module): None for NVIDIA's own;
    # the tests and a demo without a GPU give a recorded one (telemetry.recorded).
    nvml: object | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Stopped:
    """How ``Server.serve`` ended: ``by`` the signal that stopped it (None: uvicorn
    stopped by itself), and whether the controller's thread ended before the database
    was closed."""

    by: signal.Signals | None
    controller_stopped: bool

    def describe(self) -> str:
        """One line for the person who stopped the server."""
        how = "phalanx stopped" + (f" on {self.by.name}" if self.by is not None else "")
        if not self.controller_stopped:
            return (
                f"{how}, but its controller was still busy and was cut off; database "
                "closed; the next start reconciles what it left"
            )
        return (
            f"{how}: API, submissions and controller stopped, database closed; running "
            "tasks keep running and the next start adopts them"
        )


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, minus the re-raise of the signal that stopped it.

    uvicorn (0.54) catches SIGINT and SIGTERM while it serves, shuts itself down, puts
    the previous handlers back and raises the caught signal again. SIGTERM's default
    action then ends the process on the spot, so nothing after ``run()`` would ever
    run. Here the handlers are the same, but the signals are only recorded in
    ``signals``: ``Server.serve`` shuts everything down, then returns.
    """

    def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
        super().__init__(config)
        self.signals: list[signal.Signals] = []
        self.stopping = stopping  # set as the serving stops: open streams end

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Catch SIGINT and SIGTERM while serving (main thread only, as signals are);
        a second SIGINT still forces uvicorn out of its graceful wait."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        caught = (signal.SIGINT, signal.SIGTERM)
        previous = {signum: signal.signal(signum, self._caught) for signum in caught}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _caught(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signal.Signals(signum))
        self.handle_exit(signum, frame)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop serving; first, tell open streams to end (``stopping``), or uvicorn's
        graceful wait would wait on a followed log until its job ends."""
        self.stopping.set()
        super().handle_exit(sig, frame)


class Server:
    """The assembled control plane. ``serve`` blocks; ``start``/``stop`` run it on a thread."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        data_dir = settings.data_dir
        root = os.geteuid() == 0 if settings.root is None else settings.root
        per_user = decide(root=root, shared=settings.shared_identity) is IdentityMode.PER_USER
        self._per_user = per_user
        self.tasks_dir = settings.tasks_dir or default_tasks_dir(data_dir, per_user=per_user)
        if per_user:
            check_tasks_dir(self.tasks_dir, data_dir)
        prepare_data_dir(data_dir)  # private (0700) before anything is read or written
        if per_user:
            open_tasks_dir(self.tasks_dir)
        self.db = Database.open(settings.db_url or sqlite_url(data_dir))
        self.admin_token = bootstrap_admin(self.db, data_dir)
        # One statement: __init__ is at ruff's limit of 50.
        self.metrics_token, self.secret_box = (
            metrics_token(data_dir),
            SecretBox.load_or_create(data_dir / KEY_FILE),
        )
        self.tenancy = Tenancy.for_server(
            self.db, shared=settings.shared_identity, uids=settings.task_uids, root=root
        )
        given = self.tenancy.ensure_identities(self.db)
        self.metrics = Metrics()
        isolation, defaults = host_isolation(), LimitDefaults()
        executors: list[LocalExecutor | RayExecutor] = []
        ray = None
        if settings.executor == "ray":
            ray = ray_cluster(settings, self.tasks_dir, per_user, defaults, self._executor_news)
            nodes = ray.state.nodes
            try:  # steps on several machines hand artifacts on through the workspace
                check_shared(settings.workspace, nodes=len(nodes))
            except InvalidInput:
                ray.close()
                raise
        else:
            nodes = cluster_nodes(settings.cluster)

        def executor(resolve: Callable[[Bind], TaskLaunch]) -> LocalExecutor | RayExecutor:
            if ray is not None:
                executors.append(RayExecutor(ray, resolve))
                return executors[-1]
            made = LocalExecutor(
                data_dir,
                resolve,
                host="127.0.0.1",
                isolation=isolation,
                tasks_dir=self.tasks_dir,
                per_user=per_user,
                limits=defaults,
                on_events=self._executor_news,
                gpus=_gpu_watch(settings, nodes),
            )
            executors.append(made)
            return made

        copies, self.dataset_inputs, self._node_caches = _caches(
            self.tasks_dir, ray, settings, self._secret_values
        )
        self.controller = Controller(
            self.db,
            nodes,
            load_policy(settings.scheduler).config,
            executor,
            timing=settings.timing,
            metrics=self.metrics,
            identity_of=self.tenancy.identities if per_user else None,
            host=HostFacts(
                limits=limits_line(isolation, defaults), identity=self.tenancy.describe()
            ),
            model_cache=copies if isinstance(copies, ModelCache) else None,
            datasets=self.dataset_inputs,
            secrets=self._secret_values,
        )
        if settings.colocation is not None and isinstance(executors[0], LocalExecutor):
            self.controller.colocation = Colocation(executors[0], settings.colocation)
        self._executors = executors
        self.workflows = Workflows(
            self.db,
            self.controller,
            Workspace(
                check_workspace(settings.workspace)
                if settings.workspace
                else str(default_workspace(data_dir, per_user=per_user))
            ),
            period=settings.timing.period,
            identity_of=self.tenancy.identities if per_user else None,
        )
        self.controller.on_jobs_ended.append(self.workflows.poke)
        self._models_and_services(settings, copies)
        self._announce(given, isolation)
        self.metrics.watch(
            self.db, lambda: self.controller.view, gpus=lambda: self.controller.telemetry.picture
        )
        self.app = create_app(
            self.db,
            self.controller,
            self.metrics,
            self.tenancy,
            metrics_token=self.metrics_token,
            workflows=self.workflows,
            registrar=self.registrar,
            fetcher=self.fetcher,
            on_stored=self._stored,
            serving=self.serving,
            gateway=self.gateway,
            console_api=lambda: self.loopback_url,
            reports_dir=settings.reports,
            throttle=Throttle(settings.throttle),
            secret_box=self.secret_box,
            lister=self.lister,
            warmer=self.warmer,
            tuner=self.tuner,
            price_sheet=settings.price_sheet,
        )
        config = uvicorn.Config(
            self.app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._uvicorn = _Uvicorn(config, self.app.state.stopping)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API's base URL."""
        return f"http://{self.settings.host}:{self._bound_port()}"

    @property
    def loopback_url(self) -> str:
        """The API's base URL as this host reaches it (the web console's client): the
        bound address, or the loopback one when bound to every address."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(
            self.settings.host, self.settings.host
        )
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self._bound_port()}"

    def serve(self) -> Stopped:
        """Serve until SIGINT or SIGTERM (or uvicorn stops), then shut down in order and
        return how it ended. The shutdown runs whatever ended the serving, an exception
        included: queued submissions are written, the controller's tick completes
        (up to ``Controller.shutdown``'s timeout), then the database is closed."""
        # Request threads hand the GIL to each other around every database call; the
        # default 5 ms switch interval turns that into a convoy under load.
        sys.setswitchinterval(0.0005)
        self.controller.start()
        self.workflows.start()
        for worker in self._workers:
            worker.start()
        try:
            self._uvicorn.run()
        finally:
            controller_stopped = self._close()
        signals = self._uvicorn.signals
        return Stopped(by=signals[0] if signals else None, controller_stopped=controller_stopped)

    def _models_and_services(
        self,
        settings: ServerSettings,
        copies: ModelCache | NodeModels,
    ) -> None:
        """The model registrar and fetcher, the serving controller and the gateway."""
        model_store = ModelStore(model_store_url(settings))
        identity_of = self.tenancy.identities if self._per_user else None
        self.registrar = ModelRegistrar(
            self.db,
            model_store,
            Where(
                tasks_dir=self.tasks_dir,
                nodes=copies if isinstance(copies, NodeModels) else None,
                identity_of=identity_of,
                runtime=detect_runtime(),
                scratch=settings.data_dir / "scratch",
            ),
            period=settings.timing.period * 5,
        )
        self.controller.on_jobs_ended.append(self.registrar.poke)
        self.fetcher = ModelFetcher(
            self.db,
            model_store,
            copies,
            on_ready=lambda: self.controller.wake(Intent.JOBS),
            datasets=self.dataset_inputs,
            period=settings.timing.period * 5,
        )
        self.warmer = DatasetWarmer(
            self.db,
            self.dataset_inputs,
            self._node_caches,
            held=lambda: self.controller.cluster.held,
            nodes=lambda: [node.name for node in self.controller.cluster.nodes],
            period=settings.timing.period * 5,
        )

        def listed() -> None:  # what waits for a listing: jobs, steps, warm caches
            self.fetcher.listed()
            self.workflows.poke()
            self.warmer.poke()

        self.lister = DatasetLister(
            self.db, self._secret_values, on_listed=listed, period=settings.timing.period * 5
        )
        self.routes = Routes()
        tallies = Tallies()
        reports = GatewayReports(self.db)

        def answers(service: str, predictor: str) -> Tally:
            """A predictor's answers at every gateway: this one and those on their own."""
            return tallies.read(service, predictor).plus(reports.tally(service, predictor))

        self.serving = Serving(
            self.db,
            publish=self.routes.replace,
            on_stored=self._stored,
            load=self.routes.demand,
            rollouts=RolloutDriver(self.db, answers),
            reports=reports,
            period=settings.timing.period,
        )
        self.gateway = Gateway(
            self.routes,
            authorize=ServiceAccess(TokenCache(self.db), self.serving),
            on_demand=self.serving.demand,
            registry=self.metrics.registry,
            tallies=tallies,
        )
        self.metrics.registry.register(ReplicaGauge(self.serving))
        self.controller.on_jobs_ended.append(self.serving.poke)
        self.tuner = Tuner(
            self.db, on_stored=self._stored, prices=settings.prices, period=settings.timing.period
        )
        #: The controllers on threads of their own, started and stopped together.
        self._workers = (
            self.registrar,
            self.fetcher,
            self.lister,
            self.warmer,
            self.serving,
            self.tuner,
        )

    def _secret_values(self, user: str, name: str) -> dict[str, bytes] | None:
        """``user``'s secret ``name`` opened, for a task's start; None when it is gone."""
        with self.db.session() as session:
            row = stored_secrets.get(session, user, name)
            sealed = None if row is None else row.sealed
        return None if sealed is None else self.secret_box.open(sealed)

    def _stored(self, stored: Sequence[tuple[int, Job]]) -> None:
        """Jobs were stored: the controller takes them as they are (those that read
        datasets it reads once the fetcher pinned them in their stored documents), and
        the fetcher makes ready the versions and datasets they read (it waits otherwise
        for its pass)."""
        self.controller.offer([(i, job) for i, job in stored if not _reads_data(job)])
        if any(role.model_digest or role.datasets for _, job in stored for role in job.roles):
            self.fetcher.poke()

    def start(self, timeout: float = 30.0) -> None:
        """Serve on a background thread; returns once the API accepts connections."""
        self.controller.start()
        self.workflows.start()
        for worker in self._workers:
            worker.start()
        self._thread = threading.Thread(target=self._uvicorn.run, name="phalanx-api", daemon=True)
        self._thread.start()
        started = threading.Event()

        def check() -> None:
            while (
                not self._uvicorn.started and self._thread is not None and self._thread.is_alive()
            ):
                threading.Event().wait(0.02)
            started.set()

        threading.Thread(target=check, daemon=True).start()
        if not started.wait(timeout) or not self._uvicorn.started:
            raise RuntimeError(
                f"the API did not start on {self.settings.host}:{self.settings.port}"
            )

    def stop(self) -> None:
        """Stop serving and ticking; running tasks keep running (a restart adopts them)."""
        self.app.state.stopping.set()  # open streams end first (see _Uvicorn.handle_exit)
        self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._close()

    def _close(self) -> bool:
        """Write queued submissions, stop the controller, close the database; True when
        the controller's thread ended in time."""
        self.app.state.submissions.close()
        self.workflows.shutdown()
        for worker in self._workers:  # all asked first, so that their last passes overlap
            worker.stop(timeout=0)
        for worker in self._workers:
            worker.stop()
        stopped = self.controller.shutdown()
        if stopped:
            for executor in self._executors:
                executor.close()
        self.db.close()
        if self.app.state.console is not None:
            close_console(self.app.state.console)
        return stopped

    def _executor_news(self) -> None:
        """A task ended, or a node joined or died: tick soon (no controller yet: it
        starts with the latest news anyway)."""
        controller: Controller | None = getattr(self, "controller", None)
        if controller is not None:
            controller.poke()

    def _announce(self, given: list[str], isolation: Isolation) -> None:
        """Say who tasks run as and how they are limited: WARNING when less than full."""
        level, line = self.tenancy.announcement(self.tenancy.count_users(self.db))
        log.log(level, "%s", line)
        if given:
            log.info("gave %d user(s) a uid of their own: %s", len(given), ", ".join(given))
        if not isolation.full:
            log.warning(
                "task limits weaker than full: %s. Fix: run phalanx up as root on a host "
                "with the cgroup cpu, memory and pids controllers (v2, or v1 as on hybrid "
                "hosts), or delegate it a cgroup v2 subtree (%s)",
                isolation.describe(),
                CGROUP_ROOT_ENV,
            )

    def _bound_port(self) -> int:
        servers = getattr(self._uvicorn, "servers", [])
        for server in servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self.settings.port


def default_workspace_path(data_dir: Path, *, per_user: bool) -> Path:
    """Where runs keep their artifacts: ``DATA_DIR/workspace``, or ``DATA_DIR-workspace``
    beside it when tasks run as their users' own uids (who cannot enter the data dir;
    each run's directory is then its user's, mode 0700)."""
    if per_user:
        return data_dir.with_name(f"{data_dir.name}-workspace")
    return data_dir / "workspace"


def default_workspace(data_dir: Path, *, per_user: bool) -> Path:
    """``default_workspace_path``, the one beside the data dir made (mode 0711: others
    pass to their runs' directories)."""
    path = default_workspace_path(data_dir, per_user=per_user)
    if per_user:
        path.mkdir(mode=0o711, exist_ok=True)
    return path


def ray_namespace(data_dir: Path) -> str:
    """The Ray namespace of the server on ``data_dir``: its agents' names live there."""
    digest = hashlib.sha256(str(data_dir.absolute()).encode()).hexdigest()[:12]
    return f"phalanx-{digest}"


def _gpu_watch(settings: ServerSettings, nodes: Sequence[Node]) -> GpuWatch | None:
    """Readings of this host's GPUs for the local executor, reported as its one node's;
    None when it has several (declared nodes on one host: whose cards would they be?)."""
    if settings.gpu_interval is None:
        return None
    if len(nodes) != 1:
        log.info("GPU readings are off: %d nodes share this host's cards", len(nodes))
        return None
    sampler = GpuSampler(nodes[0].name, nvml=settings.nvml, interval=settings.gpu_interval)
    return GpuWatch(sampler)


def ray_cluster(
    settings: ServerSettings,
    tasks_dir: Path,
    per_user: bool,
    limits: LimitDefaults,
    on_news: Callable[[], object],
) -> RayCluster:
    """Connect to the Ray cluster of ``settings`` and follow it (``executors.ray``).

    Its namespace is the data dir's (one server's agents are never another's), and its
    agents obey the key kept in the data dir (``AGENT_KEY_FILE``); each node's agent keeps its records and tasks under ``TASKS_DIR-ray/<node>`` on its node.
    A ``--cluster`` document's nodes lend their declared GPUs to the Ray nodes of the
    same name. Raises ``InvalidInput`` without an address, or when it has no node."""
    from phalanx.executors.ray.cluster import RayCluster, connect  # noqa: PLC0415

    if not settings.ray_address:
        raise InvalidInput(
            "the ray executor needs the Ray cluster's address",
            field="--ray-address",
            fix="give the head's host:port, as `ray start --head` printed it",
        )
    namespace = ray_namespace(settings.data_dir)
    connect(settings.ray_address, namespace)
    declared = cluster_nodes(settings.cluster) if settings.cluster is not None else ()
    models = model_store_url(settings)
    cluster = RayCluster(
        namespace=namespace,
        key=kept_secret(settings.data_dir / AGENT_KEY_FILE),
        agent_root=tasks_dir.with_name(f"{tasks_dir.name}-ray"),
        per_user=per_user,
        limits=limits,
        colocation=settings.colocation,
        models=models,
        data_quota=settings.data_cache_quota,
        gpu_interval=settings.gpu_interval,
        declared={node.name: node for node in declared},
        on_change=on_news,
        on_news=on_news,
    )
    cluster.start()
    if not cluster.state.nodes:
        raise InvalidInput(
            f"the Ray cluster at {settings.ray_address} has no alive node",
            field="--ray-address",
            fix="start its nodes (ray start --address ...) and try again",
        )
    if len(cluster.state.nodes) > 1 and fsspec.core.split_protocol(models)[0] is None:
        log.warning(
            "the model store (%s) is a path on the server's machine; each Ray node reads "
            "model versions from the same path on its own disk, so a version reaches "
            "only nodes that share it. Fix: give --models a URL every node reaches "
            "(s3://bucket/models), or file:///PATH for a file system every node mounts",
            models,
        )
    log.info(
        "tasks run on the Ray cluster at %s: %s",
        settings.ray_address,
        ", ".join(node.name for node in cluster.state.nodes),
    )
    return cluster


def _caches(
    tasks_dir: Path, ray: RayCluster | None, settings: ServerSettings, secrets: SecretValues
) -> tuple[ModelCache | NodeModels, DatasetInputs, NodeCaches]:
    """Where the versions and datasets tasks read are copied out: beside the tasks dir
    (``TASKS-models``, ``TASKS-data``: the dataset cache cleaned of what a crash left),
    or on each Ray node by its agent (just before a start there, or when warmed); the
    datasets read with ``secrets``."""
    if ray is not None:
        return NodeModels(ray), DatasetInputs(None, secrets), NodeData(ray)
    data = DatasetCache(
        tasks_dir.with_name(f"{tasks_dir.name}-data"), CacheLimits(quota=settings.data_cache_quota)
    )
    data.clean()
    models = ModelCache(tasks_dir.with_name(f"{tasks_dir.name}-models"))
    return models, DatasetInputs(data, secrets), HostCache(data)


def _reads_data(job: Job) -> bool:
    return any(role.datasets for role in job.roles)


def model_store_url(settings: ServerSettings) -> str:
    """The model store of ``settings``: ``--models``, or ``DATA_DIR/models``."""
    return settings.models or str(settings.data_dir / "models")


def cluster_nodes(path: Path | None) -> tuple[Node, ...]:
    """The nodes of the Cluster document at ``path``, or this host alone."""
    if path is None:
        return (local_node(),)
    documents = [d for d in load_file(path) if isinstance(d, ClusterDocument)]
    if not documents:
        raise InvalidInput(
            f"{path} holds no Cluster document",
            field="--cluster",
            fix="give a file with kind: Cluster (docs/reference.md, Cluster)",
        )
    return tuple(node for document in documents for node in document.nodes())


def limits_line(isolation: Isolation, defaults: LimitDefaults) -> str:
    """What ``isolation`` enforces on CPU, memory and processes, and its defaults."""
    if isolation.kind not in GROUPED:
        return isolation.describe()
    return f"{isolation.describe()}; a task that requests none gets {defaults.describe()}"
