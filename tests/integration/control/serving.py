"""A real control plane on a loopback port, and a thin HTTP helper to drive it.

The server runs in-process on a background thread (or, for crash tests, as a separate
``python`` process that can be killed with SIGKILL). Waits are for conditions, with a
generous deadline that only turns a hang into a failure.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from phalanx.control.controllers.core import Timing
from phalanx.control.server import Server, ServerSettings
from phalanx.executors.local import LocalExecutor

DEADLINE = 30.0

CLUSTER = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: node
    count: 2
    resources: {cpu: 8, memory: 32Gi}
    gpus: {count: 4, model: virtual, memory: 16Gi}
"""

#: One node of eight H100s, as the recorded NVML's ``h100-sxm-8`` has them: a server
#: reading its GPUs (``running_server(nvml=...)``) needs its one node's cards.
DGX = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: dgx
    count: 1
    resources: {cpu: 16, memory: 64Gi}
    gpus: {count: 8, model: H100-SXM5-80GB, memory: 80Gi}
"""
DGX_NODE = "dgx-0"

#: Every client made during a test, closed when its server stops.
_CLIENTS: list[httpx.Client] = []

FAST = Timing(period=0.2, grace=1.0, backoff=0.2, max_backoff=1.0)


#: Set by conftest's ``backend`` fixture: ``{"base": URL}`` while tests run on PostgreSQL.
DATABASE: dict[str, str] = {}


def database_url(tmp_path: Path, *, empty: bool = False) -> str | None:
    """A fresh database for one server: a new PostgreSQL database, or None for SQLite in
    the data dir. The PostgreSQL one has the newest schema already (the server's own
    migrations find nothing to do, as on its second start); ``empty``: no schema."""
    if "base" not in DATABASE:
        return None
    from tests.integration.control.conftest import create_database, create_migrated_database

    if empty:
        return create_database(DATABASE["base"])
    return create_migrated_database(DATABASE["base"])


@contextmanager
def running_server(
    tmp_path: Path,
    *,
    cluster: str = CLUSTER,
    timing: Timing = FAST,
    workspace: str | None = None,
    reports: Path | None = None,
    colocation: float | None = None,
    data_cache_quota: int = 64 << 30,
    scheduler: str = "phalanx-default",
    nvml: object | None = None,
    gpu_interval: float | None = None,
) -> Iterator[Server]:
    """A started server over a fresh data dir (runs' artifacts in ``workspace``, default
    the data dir's; simulator reports shared from ``reports``, default none); stopped
    (and its tasks killed) afterwards. Its one node's GPUs are read every
    ``gpu_interval`` seconds through ``nvml`` (a recorded one; None: never read)."""
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(cluster)
    settings = ServerSettings(
        data_dir=tmp_path / "data",
        db_url=database_url(tmp_path),
        port=0,
        cluster=cluster_file,
        timing=timing,
        # These tests are about scheduling and lifecycles, and their tasks write into the
        # test's own directory: every task runs as the test (tests/integration/tenancy
        # covers tasks under their users' own uids).
        shared_identity=True,
        workspace=workspace,
        reports=reports,
        colocation=colocation,
        data_cache_quota=data_cache_quota,
        scheduler=scheduler,
        nvml=nvml,
        gpu_interval=gpu_interval,
    )
    server = Server(settings)
    server.start()
    try:
        yield server
    finally:
        while _CLIENTS:
            _CLIENTS.pop().close()
        executor = server.controller.core.executor
        server.stop()
        if isinstance(executor, LocalExecutor):
            for task in executor.running():
                with suppress(ProcessLookupError):
                    os.killpg(task.pid, signal.SIGKILL)

            def reaped() -> bool:
                executor.poll(now=time.time())
                return not executor.running()

            wait_for(reaped, "every task reaped")
            executor.close()  # its cgroup parents go, now that no task is left in them


class Api:
    """Requests as one user, failing loudly on unexpected status codes."""

    def __init__(self, url: str, token: str) -> None:
        self.token = token
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        _CLIENTS.append(self.http)

    def post(self, path: str, body: Any = None, expect: int = 201) -> Any:
        response = self.http.post(path, json=body)
        assert response.status_code == expect, response.text
        return response.json() if response.content else None

    def get(self, path: str, expect: int = 200, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == expect, response.text
        return response.json()

    def queue(self, name: str, **spec: Any) -> Any:
        return self.post(
            "/api/v1/queues",
            {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": name}, "spec": spec},
        )

    def submit(
        self, name: str, queue: str, *roles: dict[str, Any], expect: int = 201, **spec: Any
    ) -> Any:
        document = {
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"queue": queue, "roles": list(roles), **spec},
        }
        return self.post("/api/v1/jobs", document, expect=expect)

    def user(self, name: str, role: str = "user") -> Api:
        token = self.post("/api/v1/users", {"name": name, "role": role})["token"]
        return Api(str(self.http.base_url), token)

    def job(self, name: str) -> Any:
        return self.get(f"/api/v1/jobs/{name}")

    def wait_phase(self, name: str, *phases: str, timeout: float = DEADLINE) -> Any:
        return wait_for(
            lambda: (j := self.job(name))["phase"] in phases and j,
            f"job {name} in {phases}",
            timeout=timeout,
        )

    def wait_run(self, run_id: str, *, timeout: float = 2 * DEADLINE) -> Any:
        """The view of pipeline run ``run_id`` once it has ended (Succeeded or Failed)."""
        return wait_for(
            lambda: (
                (r := self.get(f"/api/v1/runs/{run_id}"))["phase"] in ("Succeeded", "Failed") and r
            ),
            f"run {run_id} ended",
            timeout=timeout,
        )


def role(
    name: str = "worker", replicas: int = 1, command: str | list[str] = "true", **resources: Any
) -> dict[str, Any]:
    """A role document with ``resources`` (cpu 1, memory 1Gi by default)."""
    return {
        "name": name,
        "replicas": replicas,
        "resources": {"cpu": 1, "memory": "1Gi", **resources},
        "command": command,
    }


def wait_for(condition: Callable[[], Any], what: str, *, timeout: float = DEADLINE) -> Any:
    """``condition()``'s first truthy value; fails naming ``what`` past the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
