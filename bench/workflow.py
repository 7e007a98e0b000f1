"""Step hand-off overhead and fan-out of pipeline runs on the local executor; prints one
JSON object.

    .venv/bin/python bench/workflow.py [N] [--runs R]
    .venv/bin/python bench/workflow.py --fanout ITEMS [--max-parallel P]

Starts a real server in-process (API, job controller, workflow controller, local
executor; default timing) on a fresh data dir and runs a chain of N trivial steps
(default 30), R times (default 1). Each step's process writes the time it began and,
as its last act, the time it ended (``date +%s.%N``) into its outputs. A hand-off is
the time from one step's process ending to the next step's process beginning:
``handoff_ms`` (p50, p90, p99, max over the N-1 hand-offs of each run). The same
hand-offs as the store records them (the previous job's task ``finished_at`` to the
next one's task ``started_at``, both stamped by the job controller) are
``store_handoff_ms``. ``run_s``: each run from its creation to its end.

With ``--fanout``, one run of a step that lists ITEMS numbers (default 1,000) and a
``foreach`` step over them (``maxParallel`` P, default 50), each item ``true`` asking
0.1 CPU: ``run_s`` end to end, ``items_per_s``, and ``peak_live_jobs`` (the most item
jobs between submission and end at once, from the store's times: at most P).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from phalanx.control.server import Server, ServerSettings

CLUSTER = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: bench}
spec:
  nodeGroups:
  - {name: node, count: 1, resources: {cpu: 8, memory: 32Gi}}
"""


def chain(steps: int) -> dict[str, Any]:
    """A Pipeline of ``steps`` steps, each after the one before."""
    body: dict[str, Any] = {}
    for i in range(steps):
        step: dict[str, Any] = {
            "command": "date +%s.%N > {{outputs.began}}; date +%s.%N > {{outputs.ended}}",
            "outputs": {"artifacts": ["began", "ended"]},
        }
        if i:
            step["dependsOn"] = [f"s{i - 1:03d}"]
        body[f"s{i:03d}"] = step
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "chain"},
        "spec": {"defaults": {"queue": "bench", "resources": {"cpu": 1}}, "steps": body},
    }


def fanout(items: int, parallel: int) -> dict[str, Any]:
    """A Pipeline whose ``each`` step runs ``true`` for each of ``items`` numbers that
    its ``list`` step writes, ``parallel`` at a time."""
    write = f"python3 -c 'import json; print(json.dumps(list(range({items}))))'"
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "fanout"},
        "spec": {
            "defaults": {"queue": "bench", "resources": {"cpu": "100m", "memory": "64Mi"}},
            "steps": {
                "list": {
                    "command": f"{write} > {{{{outputs.items}}}}",
                    "outputs": {"params": {"items": {"type": "list"}}},
                },
                "each": {
                    "foreach": {
                        "items": "{{steps.list.outputs.items}}",
                        "maxItems": items,
                        "maxParallel": parallel,
                    },
                    "command": "true",
                },
            },
        },
    }


def peak(intervals: list[tuple[float, float]]) -> int:
    """The most of ``intervals`` (start, end) open at one instant."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    live = most = 0
    for _, change in edges:
        live += change
        most = max(most, live)
    return most


def wait_run(http: httpx.Client, run_id: str, timeout: float) -> dict[str, Any]:
    """The run's view once it has ended Succeeded; exits on another end or a timeout."""
    deadline = time.monotonic() + timeout
    while True:
        view: dict[str, Any] = http.get(f"/api/v1/runs/{run_id}").json()
        if view["phase"] not in ("Pending", "Running"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} did not end: {view['phase']}")
        time.sleep(0.2)
    if view["phase"] != "Succeeded":
        raise SystemExit(f"run {run_id} ended {view['phase']}: {view['message']}")
    return view


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max of ``values`` (seconds), in milliseconds."""
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "p50": round(statistics.median(ordered) * 1000, 1),
        "p90": round(at(0.90) * 1000, 1),
        "p99": round(at(0.99) * 1000, 1),
        "max": round(ordered[-1] * 1000, 1),
        "count": len(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, default=30)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--fanout", type=int, default=None, metavar="ITEMS")
    parser.add_argument("--max-parallel", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-wf-") as scratch:
        root = Path(scratch)
        (root / "cluster.yaml").write_text(CLUSTER)
        data = root / "data"
        server = Server(
            ServerSettings(
                data_dir=data, port=0, cluster=root / "cluster.yaml", shared_identity=True
            )
        )
        server.start()
        try:
            http = httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {server.admin_token}"},
                timeout=30,
            )
            queue = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "bench"}}
            http.post("/api/v1/queues", json={**queue, "spec": {}}).raise_for_status()
            if args.fanout is not None:
                result = fan_out(http, args.fanout, args.max_parallel)
            else:
                result = hand_offs(http, data, args.steps, args.runs)
        finally:
            server.stop()
    print(json.dumps(result, indent=2))


def hand_offs(http: httpx.Client, data: Path, steps: int, runs: int) -> dict[str, Any]:
    """``runs`` runs of a chain of ``steps``: its hand-offs, measured two ways."""
    http.post("/api/v1/pipelines", json=chain(steps)).raise_for_status()
    handoffs: list[float] = []
    stored: list[float] = []
    durations: list[float] = []
    for _ in range(runs):
        run = http.post("/api/v1/pipelines/chain/runs", json={}).json()
        view = wait_run(http, run["id"], 60 + steps * 5)
        durations.append(view["finished_at"] - view["created_at"])
        units = view["steps"]
        workspace = data / "workspace" / "runs" / run["id"]
        for before, after in itertools.pairwise(units):
            ended = float((workspace / before["unit"] / "ended").read_text())
            began = float((workspace / after["unit"] / "began").read_text())
            handoffs.append(began - ended)
            first = http.get(f"/api/v1/jobs/{before['job']}").json()["tasks"][0]
            second = http.get(f"/api/v1/jobs/{after['job']}").json()["tasks"][0]
            stored.append(second["started_at"] - first["finished_at"])
    return {
        "steps": steps,
        "runs": runs,
        "handoff_ms": percentiles(handoffs),
        "store_handoff_ms": percentiles(stored),
        "run_s": [round(d, 2) for d in durations],
    }


def fan_out(http: httpx.Client, items: int, parallel: int) -> dict[str, Any]:
    """One run of a ``items``-item fan-out, ``parallel`` at a time, end to end."""
    http.post("/api/v1/pipelines", json=fanout(items, parallel)).raise_for_status()
    run = http.post("/api/v1/pipelines/fanout/runs", json={}).json()
    view = wait_run(http, run["id"], 120 + items)
    took = view["finished_at"] - view["created_at"]
    jobs: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        page = http.get(
            "/api/v1/jobs", params={"limit": 1000, **({"after": after} if after else {})}
        ).json()
        jobs += [j for j in page["items"] if j["name"].startswith(f"{run['id']}-each-")]
        if page["next"] is None:
            break
        after = page["next"]
    if len(jobs) != items:
        raise SystemExit(f"{len(jobs)} item jobs, not {items}")
    return {
        "items": items,
        "max_parallel": parallel,
        "run_s": round(took, 2),
        "items_per_s": round(items / took, 1),
        "peak_live_jobs": peak([(j["created_at"], j["finished_at"]) for j in jobs]),
    }


if __name__ == "__main__":
    main()
