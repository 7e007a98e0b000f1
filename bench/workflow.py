"""Step hand-off overhead of pipeline runs on the local executor; prints one JSON object.

    .venv/bin/python bench/workflow.py [N] [--runs R]

Starts a real server in-process (API, job controller, workflow controller, local
executor; default timing) on a fresh data dir and runs a chain of N trivial steps
(default 30), R times (default 1). Each step's process writes the time it began and,
as its last act, the time it ended (``date +%s.%N``) into its outputs. A hand-off is
the time from one step's process ending to the next step's process beginning:
``handoff_ms`` (p50, p90, p99, max over the N-1 hand-offs of each run). The same
hand-offs as the store records them (the previous job's task ``finished_at`` to the
next one's task ``started_at``, both stamped by the job controller) are
``store_handoff_ms``. ``run_s``: each run from its creation to its end.
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
            http.post("/api/v1/pipelines", json=chain(args.steps)).raise_for_status()
            handoffs: list[float] = []
            stored: list[float] = []
            durations: list[float] = []
            for _ in range(args.runs):
                run = http.post("/api/v1/pipelines/chain/runs", json={}).json()
                deadline = time.monotonic() + 60 + args.steps * 5
                while True:
                    view = http.get(f"/api/v1/runs/{run['id']}").json()
                    if view["phase"] not in ("Pending", "Running"):
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit(f"run {run['id']} did not end: {view['phase']}")
                    time.sleep(0.2)
                if view["phase"] != "Succeeded":
                    raise SystemExit(f"run {run['id']} ended {view['phase']}: {view}")
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
        finally:
            server.stop()
    print(
        json.dumps(
            {
                "steps": args.steps,
                "runs": args.runs,
                "handoff_ms": percentiles(handoffs),
                "store_handoff_ms": percentiles(stored),
                "run_s": [round(d, 2) for d in durations],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
