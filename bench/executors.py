"""The Ray executor against the local one, on the same shapes; prints one JSON object per line.

    .venv/bin/python bench/executors.py [ROUNDS] [BURST]

It starts a real Ray cluster on this machine (``phalanx.benchmarks.raycluster``: a head
and two workers declaring 2 and 4 GPUs, each a ``ray start`` on its own loopback
address), then a server process on it (``--executor ray``), and a server on the local
executor over a Cluster document of the same three nodes. On each:

- ``gang``: ROUNDS times, a gang of three 2-GPU tasks (both GPU nodes full), each
  printing the time it began: submit -> every task of the gang running (p50, max);
- ``burst``: BURST one-task jobs posted at once: task starts per second, and submit ->
  running p50 / p99 (the per-task cost of the launch path);
- ``node-loss`` (Ray only): a worker running a gang is killed: kill -> the tasks'
  LOST (Ray's health check plus the executor's next look), and kill -> the gang
  running again on the other worker.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from phalanx.benchmarks.raycluster import WORKERS, LoopbackCluster, loopback_cluster
from phalanx.benchmarks.serving import wait_answering
from phalanx.executors.ray.nodes import node_name
from phalanx.executors.rendezvous import free_ports

SERVE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from phalanx.control.controllers.core import Timing
    from phalanx.control.server import Server, ServerSettings
    data, port, executor, target = sys.argv[1:5]
    timing = Timing(grace=2.0)  # the default period and retry backoff, as a user gets them
    settings = ServerSettings(
        data_dir=Path(data), port=int(port), timing=timing, shared_identity=True,
        executor=executor, ray_address=target if executor == "ray" else None,
        cluster=Path(target) if executor == "local" else None,
        workspace=f"file://{data}-workspace",  # every node is this machine
    )
    Server(settings).serve()
    """
)
#: The same three nodes as the Ray cluster's (one CPU each; 0, 2 and 4 GPUs), for the local executor.
CLUSTER = "\n".join(
    [
        "apiVersion: phalanx/v1",
        "kind: Cluster",
        "metadata: {name: bench}",
        "spec:",
        "  nodeGroups:",
        *(
            f"  - {{name: gpus{gpus}, count: 1, resources: {{cpu: 1, memory: 8Gi}}"
            + (f", gpus: {{count: {gpus}, model: virtual, memory: 16Gi}}}}" if gpus else "}")
            for gpus in (0, *WORKERS.values())
        ),
    ]
)
NOW = ["/bin/date", "+%s.%N"]  # a task that prints when it began, and ends


@contextmanager
def server(root: Path, executor: str, target: str) -> Iterator[httpx.Client]:
    """A server process on ``executor`` (``target``: the Ray address or the Cluster file)."""
    (port,) = free_ports(1)
    data = root / f"data-{executor}"
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(data), str(port), executor, target],
        stderr=(root / f"server-{executor}.err").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_answering(url, process, timeout=120):
            raise RuntimeError((root / f"server-{executor}.err").read_text()[-3000:])
        token = (data / "admin.token").read_text().strip()
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as client:
            client.post("/api/v1/queues", json=_queue("bench")).raise_for_status()
            yield client
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": name}, "spec": {}}


def _job(name: str, command: str | list[str], replicas: int, **resources: Any) -> dict[str, Any]:
    role = {"name": "w", "replicas": replicas, "resources": resources, "command": command}
    spec = {"queue": "bench", "roles": [role], "maxRetry": 3}
    return {"apiVersion": "phalanx/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def _tasks(client: httpx.Client, job: str) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = client.get(f"/api/v1/jobs/{job}").json()["tasks"]
    return tasks


def _phase(client: httpx.Client, job: str, *phases: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while client.get(f"/api/v1/jobs/{job}").json()["phase"] not in phases:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{job} never reached {phases}")
        time.sleep(0.05)


def _began(client: httpx.Client, job: str, task: str) -> float:
    for _ in range(200):
        text = client.get(f"/api/v1/jobs/{job}/logs", params={"task": task}).text.strip()
        if text:
            return float(text.splitlines()[-1])
        time.sleep(0.05)
    raise RuntimeError(f"{task} of {job} wrote nothing")


def gang(client: httpx.Client, rounds: int) -> dict[str, float]:
    """Submit -> every task of a 3 x 2-GPU gang running, ``rounds`` times."""
    delays = []
    for i in range(rounds):
        name = f"gang-{i}"
        submitted = time.time()
        client.post("/api/v1/jobs", json=_job(name, NOW, 3, cpu="100m", gpu=2)).raise_for_status()
        _phase(client, name, "Succeeded", "Failed")
        began = [_began(client, name, task["name"]) for task in _tasks(client, name)]
        delays.append(max(began) - submitted)
    delays.sort()
    return {"gang_p50_s": round(_pct(delays, 50), 3), "gang_max_s": round(delays[-1], 3)}


def burst(client: httpx.Client, count: int) -> dict[str, float]:
    """``count`` one-task jobs at once: starts per second, submit -> running p50 / p99."""
    submitted: dict[str, float] = {}

    def post(i: int) -> None:
        name = f"burst-{i}"
        submitted[name] = time.time()
        client.post("/api/v1/jobs", json=_job(name, NOW, 1, cpu="10m")).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post, range(count)))
    for name in submitted:
        _phase(client, name, "Succeeded", "Failed")
    with ThreadPoolExecutor(8) as pool:
        began = dict(
            zip(
                submitted, pool.map(lambda n: _began(client, n, f"{n}-w-0"), submitted), strict=True
            )
        )
    delays = sorted(began[name] - submitted[name] for name in submitted)
    span = max(max(began.values()) - min(began.values()), 1e-3)
    return {
        "burst_jobs": count,
        "task_starts_per_s": round(count / span, 1),
        "burst_p50_s": round(_pct(delays, 50), 3),
        "burst_p99_s": round(_pct(delays, 99), 3),
    }


def node_loss(client: httpx.Client, cluster: LoopbackCluster) -> dict[str, float]:
    """Kill the worker under a running gang: -> LOST, and -> running again elsewhere."""
    name = "survivor"
    client.post("/api/v1/jobs", json=_job(name, "sleep 600", 2, cpu="100m", gpu=1))
    _phase(client, name, "Running")
    while any(task["phase"] != "Running" for task in _tasks(client, name)):
        time.sleep(0.05)
    victim = _tasks(client, name)[0]["node"]
    cluster.kill(next(a for a in cluster.workers if node_name(a) == victim))
    killed = time.time()
    while True:
        tasks = _tasks(client, name)
        if all(t["phase"] == "Running" and t["node"] != victim for t in tasks):
            break
        time.sleep(0.05)
    running_again = time.time() - killed
    events = client.get(f"/api/v1/jobs/{name}/events").json()
    lost = min(event["time"] for event in events if "is gone" in event["message"])
    client.post(f"/api/v1/jobs/{name}/cancel")
    _phase(client, name, "Cancelled", "Failed")
    return {
        "node_loss_detected_s": round(lost - killed, 2),
        "node_loss_running_again_s": round(running_again, 2),
    }


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, max(0, math.ceil(p / 100 * len(values)) - 1))]


def main(rounds: int, count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-ray-") as tmp:
        root = Path(tmp)
        (root / "cluster.yaml").write_text(CLUSTER + "\n")
        with server(root, "local", str(root / "cluster.yaml")) as client:
            local = {**gang(client, rounds), **burst(client, count)}
        print(json.dumps({"bench": "executor-local", **local}), flush=True)
        with loopback_cluster(root) as cluster, server(root, "ray", cluster.address) as client:
            ray = {**gang(client, rounds), **burst(client, count), **node_loss(client, cluster)}
        print(json.dumps({"bench": "executor-ray", **ray}), flush=True)


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:]]
    main(*(arguments + [10, 100][len(arguments) :]))
