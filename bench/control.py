"""Control-plane benchmarks from the control-plane issue; prints one JSON object per line.

    .venv/bin/python bench/control.py submit [N]        # submissions per second through the API
    .venv/bin/python bench/control.py latency [N]       # p50 / p99 submit -> running, local executor
    .venv/bin/python bench/control.py kueue [FRACTION]  # Kueue's benchmark run for real, sleep tasks
    .venv/bin/python bench/control.py burst [N]         # N one-task jobs at once from 14 clients

Each starts ``phalanx up``'s server as a separate process on a loopback port, over a
fresh data dir (SQLite unless $PHALANX_BENCH_DB names a database), and drives it over
HTTP like any client.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

from phalanx.benchmarks.serving import wait_answering
from phalanx.control.controllers.core import TERMINAL
from phalanx.domain.job import JobPhase
from phalanx.executors.rendezvous import free_ports
from phalanx.sim.traces.kueue import CLASSES, COHORTS, QUEUES_PER_COHORT, kueue_queues

SERVE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from phalanx.control.controllers.core import Timing
    from phalanx.control.server import Server, ServerSettings
    data, port, cluster, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] or None
    settings = ServerSettings(data_dir=Path(data), port=port, cluster=Path(cluster), db_url=db,
                              timing=Timing(period=1.0, grace=5.0))
    Server(settings).serve()
    """
)


def cluster(nodes: int, cpu: int, gpus: int = 0) -> str:
    """A Cluster document of ``nodes`` identical nodes."""
    gpu_line = f"\n    gpus: {{count: {gpus}, model: virtual, memory: 16Gi}}" if gpus else ""
    return (
        textwrap.dedent(
            f"""\
        apiVersion: phalanx/v1
        kind: Cluster
        metadata: {{name: bench}}
        spec:
          nodeGroups:
          - name: node
            count: {nodes}
            resources: {{cpu: {cpu}, memory: 4Ti}}"""
        )
        + gpu_line
        + "\n"
    )


@contextmanager
def server(cluster_text: str) -> Any:
    """A server process over a fresh data dir; yields an authenticated httpx client
    (whose ``server_pid`` names the server process)."""
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        root = Path(tmp)
        root.chmod(0o711)  # as root, tasks run as their users' uids in a tasks dir beside data
        (root / "cluster.yaml").write_text(cluster_text)
        (port,) = free_ports(1)
        args = [
            str(root / "data"),
            str(port),
            str(root / "cluster.yaml"),
            os.environ.get("PHALANX_BENCH_DB", ""),
        ]
        process = subprocess.Popen([sys.executable, "-c", SERVE, *args])
        url = f"http://127.0.0.1:{port}"
        try:
            if not wait_answering(url, process, timeout=60):
                raise RuntimeError("the server did not start")
            token = (root / "data" / "admin.token").read_text().strip()
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
            with httpx.Client(
                base_url=url,
                headers={"Authorization": f"Bearer {token}"},
                timeout=60,
                limits=limits,
            ) as client:
                client.server_pid = process.pid  # type: ignore[attr-defined]
                yield client
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def job(name: str, queue: str, command: str | list[str], **resources: Any) -> dict[str, Any]:
    """A one-task Job document."""
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "queue": queue,
            "roles": [{"name": "main", "replicas": 1, "resources": resources, "command": command}],
        },
    }


def queue(name: str, **spec: Any) -> dict[str, Any]:
    """A Queue document."""
    return {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def submit(count: int) -> None:
    """Submissions per second: ``count`` jobs posted by 16 concurrent clients. The jobs
    wait (their queue's capability is full), as submissions beyond capacity do."""
    with server(cluster(4, 64)) as client:
        client.post("/api/v1/queues", json=queue("bench", capability={"cpu": 1})).raise_for_status()
        documents = [job(f"sub-{i}", "bench", "true", cpu=2) for i in range(count)]
        for document in documents[:50]:  # warm up connections and code paths
            document["metadata"]["name"] += "-warm"
            client.post("/api/v1/jobs", json=document).raise_for_status()
        documents = [job(f"sub-{i}", "bench", "true", cpu=2) for i in range(count)]
        serving = psutil.Process(client.server_pid)
        server_cpu = sum(serving.cpu_times()[:2])
        client_cpu = time.process_time()
        started = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            codes = list(
                pool.map(lambda d: client.post("/api/v1/jobs", json=d).status_code, documents)
            )
        seconds = time.perf_counter() - started
        server_cpu = sum(serving.cpu_times()[:2]) - server_cpu
        client_cpu = time.process_time() - client_cpu
        assert codes.count(201) == count, {c: codes.count(c) for c in set(codes)}
        print(
            json.dumps(
                {
                    "bench": "control-submit",
                    "jobs": count,
                    "seconds": round(seconds, 3),
                    "submits_per_s": round(count / seconds, 1),
                    "target_per_s": 500,
                    "server_cpu_ms_per_submit": round(1000 * server_cpu / count, 3),
                    "client_cpu_ms_per_submit": round(1000 * client_cpu / count, 3),
                }
            ),
            flush=True,
        )


def latency(count: int) -> None:
    """Submit -> Running with real processes: ``count`` one-task jobs at 20 per second,
    each running ``sleep 0.5`` on a cluster with room for all of them."""
    with server(cluster(4, 64)) as client:
        client.post("/api/v1/queues", json=queue("bench")).raise_for_status()
        submitted: dict[str, float] = {}
        for i in range(count):
            name = f"lat-{i}"
            submitted[name] = time.time()
            client.post(
                "/api/v1/jobs", json=job(name, "bench", "sleep 0.5", cpu=1)
            ).raise_for_status()
            time.sleep(0.05)
        started = _wait_all(client, count, "Succeeded")
        delays = sorted(started[name] - submitted[name] for name in submitted)
        print(
            json.dumps(
                {
                    "bench": "control-latency",
                    "jobs": count,
                    "p50_s": round(_pct(delays, 50), 3),
                    "p99_s": round(_pct(delays, 99), 3),
                    "max_s": round(delays[-1], 3),
                    "target_p99_s": 1.0,
                }
            ),
            flush=True,
        )


def burst(count: int) -> None:
    """A burst: ``count`` one-task jobs posted as fast as 14 clients can on a cluster with
    room for all of them; each task prints the time it began, and ends.
    Submissions per second, submit -> running percentiles, and task starts per second
    from the first start to the last, all from the times the tasks printed; and how far
    the server's ``started_at`` of each task is from that time (p99)."""
    with server(cluster(4, 64)) as client:
        client.post("/api/v1/queues", json=queue("bench")).raise_for_status()
        command = ["/bin/date", "+%s.%N"]  # one exec: the launch path's cost, not a shell's
        documents = [job(f"burst-{i}", "bench", command, cpu="100m") for i in range(count)]
        submitted: dict[str, float] = {}

        def post(document: dict[str, Any]) -> int:
            name = document["metadata"]["name"]
            submitted[name] = time.time()
            return client.post("/api/v1/jobs", json=document).status_code

        began = time.perf_counter()
        with ThreadPoolExecutor(14) as pool:
            codes = list(pool.map(post, documents))
        accepting = time.perf_counter() - began
        assert codes.count(201) == count, {c: codes.count(c) for c in set(codes)}
        _wait_started(client, count)

        def began_at(name: str) -> float:
            while not (text := client.get(f"/api/v1/jobs/{name}/logs").text.strip()):
                time.sleep(0.1)  # started, but its first line is not written yet
            return float(text.splitlines()[0])

        def recorded_start(name: str) -> float:
            return float(client.get(f"/api/v1/jobs/{name}/tasks").json()["items"][0]["started_at"])

        with ThreadPoolExecutor(8) as pool:
            started = dict(zip(submitted, pool.map(began_at, list(submitted)), strict=True))
            recorded = dict(zip(submitted, pool.map(recorded_start, list(submitted)), strict=True))
        _cancel_all(client, list(submitted))
        delays = sorted(started[name] - submitted[name] for name in submitted)
        # How far the server's started_at is from the time the task printed.
        errors = sorted(abs(recorded[name] - started[name]) for name in submitted)
        starts = sorted(started.values())
        span = max(starts[-1] - starts[0], 1e-3)
        print(
            json.dumps(
                {
                    "bench": "control-burst",
                    "jobs": count,
                    "clients": 14,
                    "submits_per_s": round(count / accepting, 1),
                    "task_starts_per_s": round(count / span, 1),
                    "p50_s": round(_pct(delays, 50), 3),
                    "p99_s": round(_pct(delays, 99), 3),
                    "max_s": round(delays[-1], 3),
                    "started_at_error_p99_s": round(_pct(errors, 99), 3),
                    "target": {"task_starts_per_s": 500, "p99_s": 2.0},
                }
            ),
            flush=True,
        )


def kueue(fraction: float) -> None:
    """Kueue's baseline benchmark executed for real: 30 queues x 500 workloads (or
    ``fraction`` of each stream), each a ``sleep`` of the class's runtime, submitted on
    the generator's schedule; total time and average CPU usage of the 600-CPU cluster."""
    with server(cluster(6, 100)) as client:
        for q in kueue_queues():
            spec = {
                "deserved": {"cpu": q.deserved.get("cpu") / 1000},
                "capability": {"cpu": (q.capability.get("cpu") if q.capability else 0) / 1000},
            }
            if q.parent != "root":
                spec["parent"] = q.parent
            client.post("/api/v1/queues", json=queue(q.name, **spec)).raise_for_status()
        plan = sorted(
            (
                ((k + 1) * kind.interval_ms / 1000.0, f"cohort-{c}-cq-{i}", kind, k)
                for c in range(COHORTS)
                for i in range(QUEUES_PER_COHORT)
                for kind in CLASSES
                for k in range(max(1, math.ceil(kind.count * fraction)))
            ),
            key=lambda item: (item[0], item[1], item[2].name, item[3]),
        )
        begin = time.time()
        with ThreadPoolExecutor(8) as pool:
            futures = []
            for at, name, kind, k in plan:
                delay = begin + at - time.time()
                if delay > 0:
                    time.sleep(delay)
                document = job(
                    f"{name}-{kind.name}-{k}", name, f"sleep {kind.runtime_ms / 1000}", cpu=kind.cpu
                )
                document["spec"]["priority"] = kind.priority
                futures.append(pool.submit(client.post, "/api/v1/jobs", json=document))
            for future in futures:
                future.result().raise_for_status()
        _wait_ended(client)
        rows = _all_jobs(client)
        every = [t for tasks in _tasks_of(client, rows) for t in tasks]
        tasks = [t for t in every if t["started_at"] and t["finished_at"]]
        cpu = {f"{r['name']}": _cpu_of(r["name"]) for r in rows}
        end = max(t["finished_at"] for t in tasks)
        busy = sum(
            (t["finished_at"] - t["started_at"]) * cpu[t["name"].rsplit("-main-", 1)[0]]
            for t in tasks
        )
        total = end - begin
        print(
            json.dumps(
                {
                    "bench": "control-kueue",
                    "jobs": len(plan),
                    "succeeded": sum(r["phase"] == "Succeeded" for r in rows),
                    "total_s": round(total, 1),
                    "usage": round(busy / (600 * total), 3),
                    "kueue_published": {"total_s": 351.0, "usage": 0.559},
                }
            ),
            flush=True,
        )


def _cpu_of(name: str) -> int:
    return next(kind.cpu for kind in CLASSES if f"-{kind.name}-" in name)


def _all_jobs(client: httpx.Client) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after"] = after
        page = client.get("/api/v1/jobs", params=params).json()
        rows.extend(page["items"])
        after = page["next"]
        if after is None:
            return rows


def _tasks_of(client: httpx.Client, rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every task of each job of ``rows`` (a listing carries task counts, not tasks)."""

    def tasks(name: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000}
        while True:
            page = client.get(f"/api/v1/jobs/{name}/tasks", params=params).json()
            found.extend(page["items"])
            if page["next"] is None:
                return found
            params["after"] = page["next"]

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(tasks, [r["name"] for r in rows]))


def _wait_ended(client: httpx.Client) -> None:
    """Until no job is live (one light query a second)."""
    live = {"phase": [p.value for p in JobPhase if p not in TERMINAL], "limit": 1}
    while client.get("/api/v1/jobs", params=live).json()["items"]:
        time.sleep(1)


def _cancel_all(client: httpx.Client, names: list[str]) -> None:
    """Cancel ``names`` and wait for their ends, so that the server removes their
    cgroups: tasks left running at its shutdown would end with nobody to remove them."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: client.post(f"/api/v1/jobs/{name}/cancel"), names))
    _wait_ended(client)


def _wait_started(client: httpx.Client, count: int) -> None:
    """Until each of the ``count`` jobs has a task that started (from the listing's task
    counts: a light poll, which does not slow down what it measures)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        rows = _all_jobs(client)
        counts = [r["task_counts"] for r in rows]
        if len(rows) == count and all(c.get("Running") or c.get("Succeeded") for c in counts):
            return
        time.sleep(2.0)  # each poll reads 2,000 rows: poll seldom, not to slow the server
    raise RuntimeError("not every job started")


def _wait_all(client: httpx.Client, count: int, *phases: str) -> dict[str, float]:
    """When each of the ``count`` jobs' first task started, once every job is in one of
    ``phases``."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        rows = _all_jobs(client)
        if len(rows) == count and all(r["phase"] in phases for r in rows):
            tasks = _tasks_of(client, rows)
            started = {r["name"]: t[0]["started_at"] for r, t in zip(rows, tasks, strict=True)}
            if None not in started.values():  # a job is Running once placed, before it starts
                return started
        time.sleep(0.5)
    raise RuntimeError(f"not every job reached {' or '.join(phases)}")


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, max(0, math.ceil(p / 100 * len(values)) - 1))]


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or ["submit"]
    if command == "submit":
        submit(int(rest[0]) if rest else 2000)
    elif command == "latency":
        latency(int(rest[0]) if rest else 200)
    elif command == "kueue":
        kueue(float(rest[0]) if rest else 1.0)
    elif command == "burst":
        burst(int(rest[0]) if rest else 2000)
    else:
        raise SystemExit(f"unknown bench {command!r}: submit, latency, kueue or burst")
