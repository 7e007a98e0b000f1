"""A control plane in a process of its own, to be killed, stopped by a signal, restarted.

``start`` runs the server one of two ways on a data dir, a Cluster file and a database:

- ``cli=True``: ``phalanx up`` itself (``python -m phalanx.cli.main up ...``), with its
  default timing: what a service manager runs, exit code included;

In both every task runs as the server (``--shared-identity``): these tests' tasks write
into the test's own directory, which only root may enter.
- otherwise the same ``Server.serve`` with ``serving.FAST`` timing (backoff 0.2 s), so a
  test can watch a retry without waiting out the default ten seconds.

Both write their output to files beside the data dir (never a pipe that could fill).
A server that exits before it answers fails the test at once with its stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from phalanx.executors.rendezvous import free_ports
from tests.integration.control.serving import CLUSTER, DEADLINE, Api

SERVE = textwrap.dedent(
    """
    import os, resource, sys
    from pathlib import Path
    if os.environ.get("PHALANX_TEST_STACK"):  # ARG_MAX is a quarter of the stack limit
        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        resource.setrlimit(resource.RLIMIT_STACK, (int(os.environ["PHALANX_TEST_STACK"]), hard))
    from phalanx.control.controllers.core import Timing
    from phalanx.control.server import Server, ServerSettings
    data, port, cluster, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] or None
    timing = Timing(period=0.2, grace=1.0, backoff=0.2, max_backoff=1.0)
    settings = ServerSettings(
        data_dir=Path(data), port=port, cluster=Path(cluster), db_url=db, timing=timing,
        shared_identity=True,
    )
    Server(settings).serve()
    """
)


@dataclass(slots=True, kw_only=True)
class ServerProcess:
    """One running server process and where its output goes."""

    process: subprocess.Popen[bytes]
    url: str
    data: Path
    stderr: Path

    def api(self) -> Api:
        """A client as the admin (the token ``phalanx up`` saved in the data dir)."""
        return Api(self.url, (self.data / "admin.token").read_text().strip())

    def log(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self.stderr.read_text(errors="replace")

    def signal_and_wait(self, signum: int, timeout: float = DEADLINE) -> int:
        """Send ``signum``; the exit status once the process ended (``-N``: killed by N)."""
        self.process.send_signal(signum)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL, if it still runs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(DEADLINE)


def start(
    tmp_path: Path,
    *,
    db: str | None,
    cluster: str = CLUSTER,
    port: int | None = None,
    cli: bool = False,
    stack_limit: int | None = None,
    deadline: float = DEADLINE,
) -> ServerProcess:
    """A server on ``tmp_path/data`` answering ``/healthz`` (the same data dir, cluster
    file and database on every call: a restart) within ``deadline`` seconds. ``stack_limit`` (bytes; not with
    ``cli``) lowers the server's stack limit once it runs, and so the ``ARG_MAX`` of the
    tasks it starts (a quarter of it). A port chosen here that another process took
    first is replaced by another."""
    (port_,) = (port,) if port is not None else free_ports(1)
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(cluster)
    data = tmp_path / "data"
    runs = len(list(tmp_path.glob("server-*.err")))
    out = tmp_path / f"server-{runs}.out"
    err = tmp_path / f"server-{runs}.err"
    if cli:
        args = [sys.executable, "-m", "phalanx.cli.main", "up", "--data-dir", str(data)]
        args += ["--port", str(port_), "--cluster", str(cluster_file), "--shared-identity"]
        args += ["--db", db] if db else []
    else:
        args = [sys.executable, "-c", SERVE, str(data), str(port_), str(cluster_file), db or ""]
    env = {**os.environ, "PHALANX_TEST_STACK": str(stack_limit or "")}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(args, stdout=stdout, stderr=stderr, env=env)
    served = ServerProcess(process=process, url=f"http://127.0.0.1:{port_}", data=data, stderr=err)
    until = time.monotonic() + deadline
    while True:
        code = process.poll()
        if code is not None:
            if port is None and "address already in use" in served.log().lower():
                # the port chosen here was taken before the server bound it: another one
                return start(
                    tmp_path, db=db, cluster=cluster, cli=cli, stack_limit=stack_limit,
                    deadline=deadline,
                )  # fmt: skip
            raise AssertionError(f"the server exited with {code} before answering:\n{served.log()}")
        try:
            if httpx.get(f"{served.url}/healthz", timeout=1).status_code == 200 and listens(
                process.pid, port_
            ):
                return served
        except httpx.HTTPError:
            pass
        if time.monotonic() > until:
            served.kill()
            raise AssertionError(f"the server did not answer:\n{served.log()}")
        time.sleep(0.05)


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself listens on ``port``: a free port chosen here may be
    taken by another worker's server before this one binds it, and that server's
    ``/healthz`` answers too (then this one exits, unable to bind)."""
    try:
        sockets = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        return False
    return any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets)


def count_dirs(path: Path) -> int:
    """How many entries ``path`` holds (0 while it does not exist)."""
    try:
        return sum(1 for _ in path.iterdir())
    except FileNotFoundError:
        return 0
