"""A phalanx server process on the loopback Ray cluster, killable and restartable on
the same data dir, and what its tests read back from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx

from phalanx.benchmarks.raycluster import DEADLINE
from phalanx.executors.rendezvous import free_ports
from tests.integration.control.processes import listens
from tests.integration.control.serving import Api

SERVE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from phalanx.control.controllers.core import Timing
    from phalanx.control.server import Server, ServerSettings
    data, port, address = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    shared, workspace = sys.argv[4] == "shared", sys.argv[5]
    timing = Timing(period=0.2, grace=1.0, backoff=0.2, max_backoff=1.0)
    settings = ServerSettings(
        data_dir=Path(data), port=port, executor="ray", ray_address=address,
        timing=timing, shared_identity=shared,
        workspace=workspace,
    )
    Server(settings).serve()
    """
)
#: A worker's two GPU nodes: 127.0.0.2 declares 2 GPUs and 127.0.0.3 declares 4.
SMALL, LARGE = "ray-127-0-0-2", "ray-127-0-0-3"


class Served:
    """One server process on the Ray cluster, restartable on the same data dir."""

    def __init__(
        self,
        tmp_path: Path,
        address: str,
        *,
        identity: str = "shared",
        workspace: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp_path = tmp_path
        self.address = address
        self.identity = identity  # "shared" (--shared-identity) or "per-user"
        # Every node is this machine: a file:// workspace is one they all mount.
        self.workspace = workspace or f"file://{tmp_path}/workspace"
        self.env = {**os.environ, **(env or {})}
        self.data = tmp_path / "data"
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> Api:
        self.runs += 1
        err = self.tmp_path / f"server-{self.runs}.err"
        with err.open("wb") as stderr:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    SERVE,
                    str(self.data),
                    str(self.port),
                    self.address,
                    self.identity,
                    self.workspace,
                ],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + DEADLINE
        while True:
            code = self.process.poll()
            assert code is None, f"the server exited with {code}:\n{err.read_text()[-3000:]}"
            try:
                answer = httpx.get(f"{self.url}/healthz", timeout=1)
                if answer.status_code == 200 and listens(self.process.pid, self.port):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.1)
        return Api(self.url, (self.data / "admin.token").read_text().strip())

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(DEADLINE)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(DEADLINE)


def tasks_of(api: Api, job: str) -> dict[str, Any]:
    return {task["name"]: task for task in api.job(job)["tasks"]}


def log_of(api: Api, job: str, task: str) -> str:
    response = api.http.get(f"/api/v1/jobs/{job}/logs", params={"task": task})
    assert response.status_code == 200, response.text
    return response.text
