"""A real Ray cluster on this machine: a head and two workers, each its own ``ray start``
on its own loopback address (head 127.0.0.4, workers 127.0.0.2 and 127.0.0.3, with 2 and
4 declared GPUs), health-checked every 500 ms so that a lost node is seen within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from phalanx.executors.rendezvous import free_ports

ray = pytest.importorskip("ray", reason="the Ray executor's tests need the ray extra")

HEAD = "127.0.0.4"
WORKERS = {"127.0.0.2": 2, "127.0.0.3": 4}  # address -> GPUs it declares
#: Health checks fast enough that a lost node is declared dead in a few seconds.
HEALTH = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_raylet_start_wait_time_s": "60",  # two cores, busy: a raylet may take a while
}
#: Far above what a start takes; only there to stop a hang.
DEADLINE = 60.0


RAY_CLI = str(Path(sys.executable).parent / "ray")
#: What every node is started with: one CPU, a small object store.
COMMON = ["--num-cpus", "1", "--object-store-memory", "80000000"]


@dataclass
class RayCluster:
    """The running cluster: its address and each worker's ``ray start`` process group."""

    address: str
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def kill(self, worker: str) -> None:
        """Kill a worker's raylet and everything it started (its process group)."""
        process = self.workers.pop(worker)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for worker in list(self.workers):
            self.kill(worker)
        subprocess.run([RAY_CLI, "stop", "--force"], capture_output=True, check=False)


def _worker(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as errors:
        return subprocess.Popen(
            [RAY_CLI, "start", *args, *COMMON, "--block"],
            env={**os.environ, **HEALTH},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,  # its own group: killing it kills its raylet too
        )


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    temp = tmp_path_factory.mktemp("ray")
    (port,) = free_ports(1, HEAD)
    cluster = RayCluster(address=f"{HEAD}:{port}")
    log = temp / "ray-start.log"
    head = [
        "--head", "--node-ip-address", HEAD, "--port", str(port), "--num-gpus", "0",
        "--include-dashboard=false", "--disable-usage-stats",
    ]  # fmt: skip
    # Without --block: it returns once the head is up (its processes are `ray stop`'s).
    started = subprocess.run(
        [RAY_CLI, "start", *head, *COMMON],
        env={**os.environ, **HEALTH},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert started.returncode == 0, started.stderr.decode()[-3000:]
    try:
        ray.init(address=cluster.address, logging_level="ERROR")
        for joined, (address, gpus) in enumerate(WORKERS.items(), start=2):
            cluster.workers[address] = _worker(
                ["--address", cluster.address, "--node-ip-address", address,
                 "--num-gpus", str(gpus)],
                log,
            )  # fmt: skip
            deadline = time.monotonic() + DEADLINE  # one at a time: a busy host is slow
            while sum(node["Alive"] for node in ray.nodes()) < joined:
                if time.monotonic() > deadline:
                    raise AssertionError(log.read_text()[-3000:])
                time.sleep(0.2)
        yield cluster
    finally:
        ray.shutdown()
        cluster.stop()
