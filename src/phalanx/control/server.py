"""``phalanx up`` in one process: the API, the controller and the local executor.

The data dir holds the SQLite database (unless ``db`` names another), the admin token,
and every task's working directory and logs. Starting again on the same data dir
resumes: accepted jobs are all there, live tasks are re-adopted.
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from phalanx.control.app import create_app
from phalanx.control.auth import bootstrap_admin
from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.core import Timing
from phalanx.control.localhost import local_node
from phalanx.control.metrics import Metrics
from phalanx.control.store.database import Database, sqlite_url
from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Node
from phalanx.executors.local import LocalExecutor
from phalanx.policies import load_policy
from phalanx.spec import ClusterDocument, load_file

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


class Server:
    """The assembled control plane. ``serve`` blocks; ``start``/``stop`` run it on a thread."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        data_dir = settings.data_dir
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.db = Database.open(settings.db_url or sqlite_url(data_dir))
        self.admin_token = bootstrap_admin(self.db, data_dir)
        self.metrics = Metrics()
        nodes = cluster_nodes(settings.cluster)
        self.controller = Controller(
            self.db,
            nodes,
            load_policy(settings.scheduler).config,
            lambda resolve: LocalExecutor(data_dir, resolve, host="127.0.0.1"),
            timing=settings.timing,
            metrics=self.metrics,
        )
        self.metrics.watch(self.db, lambda: self.controller.view)
        self.app = create_app(self.db, self.controller, self.metrics)
        config = uvicorn.Config(
            self.app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API's base URL."""
        return f"http://{self.settings.host}:{self._bound_port()}"

    def serve(self) -> None:
        """Run until interrupted (Ctrl-C / SIGTERM)."""
        # Request threads hand the GIL to each other around every database call; the
        # default 5 ms switch interval turns that into a convoy under load.
        sys.setswitchinterval(0.0005)
        self.controller.start()
        try:
            self._uvicorn.run()
        finally:
            self.app.state.submissions.close()
            self.controller.shutdown()
            self.db.close()

    def start(self, timeout: float = 30.0) -> None:
        """Serve on a background thread; returns once the API accepts connections."""
        self.controller.start()
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
        self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.app.state.submissions.close()
        self.controller.shutdown()
        self.db.close()

    def _bound_port(self) -> int:
        servers = getattr(self._uvicorn, "servers", [])
        for server in servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self.settings.port


def cluster_nodes(path: Path | None) -> tuple[Node, ...]:
    """The nodes of the Cluster document at ``path``, or this host alone."""
    if path is None:
        return (local_node(),)
    documents = [d for d in load_file(path) if isinstance(d, ClusterDocument)]
    if not documents:
        raise InvalidInput(
            f"{path} holds no Cluster document",
            field="--cluster",
            fix="give a file with kind: Cluster (see DESIGN.md section 6)",
        )
    return tuple(node for document in documents for node in document.nodes())
