"""A real Ray cluster on this machine, for tests and benchmarks: a head and workers, each
its own ``ray start`` on its own loopback address.

Ray 2.60 keeps every node on the address it is given when the head is on 127.0.0.4
and the workers on 127.0.0.2, 127.0.0.3 (a head on 127.0.0.1 advertises the machine's
interface address instead), so all traffic stays inside 127.0.0.0/8. Health checks run
every 500 ms, so a lost node is declared dead in a few seconds. The cluster is locked
with Ray's token authentication (``RAY_AUTH_MODE=token``): a fresh random token that
every node, this process and its children (the servers tests start) present, and
nothing else has, so nothing without it reaches the GCS, a raylet or an agent. ``stop`` ends only the
processes started here, by process group: every ``ray start`` runs with ``--block`` in a
session of its own, so killing its group ends the node's raylet, its workers and (for the
head) the GCS. Never ``ray stop``, which would end every Ray process on the machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from phalanx.executors.rendezvous import free_ports

HEAD: Final = "127.0.0.4"
#: Worker address -> the GPUs it declares (fake: Ray counts them, nothing uses them).
WORKERS: Final[Mapping[str, int]] = {"127.0.0.2": 2, "127.0.0.3": 4}
#: Health checks fast enough that a lost node is declared dead in a few seconds.
HEALTH: Final[Mapping[str, str]] = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_raylet_start_wait_time_s": "60",  # two cores, busy: a raylet may take a while
}
#: Far above what a start takes; only there to stop a hang.
DEADLINE: Final = 60.0
RAY_CLI: Final = str(Path(sys.executable).parent / "ray")
#: What every node is started with: one CPU, a small object store.
COMMON: Final = ("--num-cpus", "1", "--object-store-memory", "80000000")


#: The variables of Ray's token authentication.
AUTH_MODE: Final = "RAY_AUTH_MODE"
AUTH_TOKEN: Final = "RAY_AUTH_TOKEN"


@dataclass
class LoopbackCluster:
    """The running cluster: its address, its authentication token and each worker's
    ``ray start`` process group."""

    address: str
    token: str = ""
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    head: subprocess.Popen[bytes] | None = None

    def join(self, worker: str, gpus: int, scratch: Path) -> None:
        """Start one more worker on ``worker`` (a loopback address) declaring ``gpus``;
        returns at once (Ray lists it once its raylet registers)."""
        self.workers[worker] = _node(
            ["--address", self.address, "--node-ip-address", worker, "--num-gpus", str(gpus)],
            scratch / "ray-start.log",
        )

    def kill(self, worker: str) -> None:
        """Kill a worker's raylet and everything it started (its process group)."""
        _kill_group(self.workers.pop(worker))

    def stop(self) -> None:
        """Kill every worker left, then the head (each by its process group)."""
        for worker in list(self.workers):
            self.kill(worker)
        if self.head is not None:
            _kill_group(self.head)
            self.head = None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _node(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as errors:
        return subprocess.Popen(
            [RAY_CLI, "start", *args, *COMMON, "--block"],
            env={**os.environ, **HEALTH},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,  # its own group: killing it kills its raylet too
        )


def _authenticate(variables: Mapping[str, str | None]) -> None:
    """Set (None: unset) Ray's authentication variables for this process and its
    children, and have this process's Ray read them again (it read them at import)."""
    from ray._raylet import (  # type: ignore[attr-defined]  # noqa: PLC0415
        AuthenticationTokenLoader,
        Config,
    )

    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _listening(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, port)) == 0


def _alive(ray: Any) -> int:
    return sum(bool(node["Alive"]) for node in ray.nodes())


@contextmanager
def loopback_cluster(
    scratch: Path, workers: Mapping[str, int] = WORKERS
) -> Iterator[LoopbackCluster]:
    """Start the head, then each worker (one at a time: a busy host is slow), yield the
    cluster once every node is alive, and stop it at the end. This process is
    connected to it (``ray.init``) meanwhile. ``scratch`` takes ``ray start``'s errors."""
    import ray  # noqa: PLC0415  # the optional extra

    (port,) = free_ports(1, HEAD)
    cluster = LoopbackCluster(address=f"{HEAD}:{port}", token=secrets.token_hex(32))
    before = {name: os.environ.get(name) for name in (AUTH_MODE, AUTH_TOKEN)}
    _authenticate({AUTH_MODE: "token", AUTH_TOKEN: cluster.token})
    log = scratch / "ray-start.log"
    head = [
        "--head", "--node-ip-address", HEAD, "--port", str(port), "--num-gpus", "0",
        "--include-dashboard=false", "--disable-usage-stats",
    ]  # fmt: skip
    cluster.head = _node(head, log)
    deadline = time.monotonic() + DEADLINE
    while not _listening(HEAD, port):
        if cluster.head.poll() is not None or time.monotonic() > deadline:
            cluster.stop()
            raise RuntimeError(f"ray start --head failed:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    try:
        ray.init(address=cluster.address, logging_level=logging.ERROR)
        for joined, (address, gpus) in enumerate(workers.items(), start=2):
            cluster.workers[address] = _node(
                ["--address", cluster.address, "--node-ip-address", address,
                 "--num-gpus", str(gpus)],
                log,
            )  # fmt: skip
            deadline = time.monotonic() + DEADLINE
            while _alive(ray) < joined:
                if time.monotonic() > deadline:
                    raise RuntimeError(log.read_text()[-3000:])
                time.sleep(0.2)
        yield cluster
    finally:
        ray.shutdown()
        cluster.stop()
        _authenticate(before)
