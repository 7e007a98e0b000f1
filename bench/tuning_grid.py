"""Measure the ground truth of right-sizing (issue 40): every spec of a grid, for real.

    .venv/bin/python bench/tuning_grid.py [--out bench/data/tuning_grid.json]
        [--duration 10] [--warmup 3] [--rate 20]
    .venv/bin/python bench/tuning_grid.py --chart docs/right-sizing-grid.svg

A real ``phalanx up`` (SQLite, the local executor, one node of this host's 2 cores)
serves a CPU-bound TorchScript model (``phalanx.examples.tuning_model``: a 3-layer
perceptron of 2048 units, registered as a model version by a job) with the built-in
runtime, and a Tuning with the grid sampler measures every spec of the space below,
one trial at a time, each a replica with exactly that spec (its CPU quota and memory
limit enforced by cgroups), warmed up, then loaded open-loop at ``--rate`` requests/s
of 32 instances each for ``--duration`` seconds. Every trial's measurement is written,
in ``bench/tuning_replay.py``'s ground-truth format (``phalanx/tuning-grid/v1``), to
``--out``; the replay then counts how many trials the samplers need to reach the
grid's optimum. The space: cpu 250m..2 (6 values) x memory 1Gi, 1536Mi, 2Gi x
OMP_NUM_THREADS 1, 2, 4: 54 specs. The objective stored with it: the cheapest spec
whose p99 stays under 150 ms with under 1% errors.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import httpx

from phalanx.benchmarks.serving import wait_answering
from phalanx.executors.rendezvous import free_ports

CPUS: Final = ["250m", "500m", "750m", "1", "1500m", "2"]
MEMORIES: Final = ["1Gi", "1536Mi", "2Gi"]
THREADS: Final = [1, 2, 4]
SLO: Final = 0.150
INSTANCES: Final = 32
CLUSTER: Final = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: bench}
spec:
  nodeGroups:
  - name: node
    count: 1
    resources: {cpu: 4, memory: 12Gi}
"""


class Api:
    """The server's API as its admin."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def post(self, path: str, body: Any, expect: int = 201) -> Any:
        answer = self.http.post(path, json=body)
        if answer.status_code != expect:
            raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text}")
        return answer.json()

    def get(self, path: str) -> Any:
        answer = self.http.get(path)
        answer.raise_for_status()
        return answer.json()

    def until(self, path: str, done: Any, what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = self.http.get(path)
            if answer.status_code != 404:  # not there yet
                answer.raise_for_status()
                if done(answer.json()):
                    return answer.json()
            time.sleep(1.0)
        raise RuntimeError(f"{what}: not within {timeout:g} s")


def document(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "phalanx/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def measure(api: Api, args: argparse.Namespace) -> dict[str, Any]:
    """Register the model, serve it, run the grid tuning; the ground truth."""
    python = sys.executable
    api.post("/api/v1/queues", document("Queue", "bench", {"parent": "root"}))
    role = {
        "name": "make",
        "replicas": 1,
        "resources": {"cpu": 1, "memory": "2Gi"},
        "command": [python, "-m", "phalanx.examples.tuning_model", "--out", "model"],
        "model": {"name": "mlp", "path": "model"},
    }
    api.post("/api/v1/jobs", document("Job", "make-mlp", {"queue": "bench", "roles": [role]}))
    api.until("/api/v1/models/mlp", lambda v: len(v) > 0, "the model registered", 300)
    base = {"cpu": "250m", "memory": "1Gi"}
    predictor = {"name": "main", "modelVersion": "mlp", "runtime": "torchscript", "resources": base}
    api.post(
        "/api/v1/inferences",
        document("Inference", "mlp", {"queue": "bench", "predictors": [predictor]}),
    )
    api.until("/api/v1/inferences/mlp", lambda v: v["ready"], "the service Ready", 300)
    space = [
        {"name": "cpu", "category": "resources", "type": "discrete", "values": CPUS},
        {"name": "memory", "category": "resources", "type": "discrete", "values": MEMORIES},
        {"name": "OMP_NUM_THREADS", "category": "env", "type": "discrete", "values": THREADS},
    ]
    body = {"instances": [[((i * 7 + j) % 11) / 10 for j in range(256)] for i in range(INSTANCES)]}
    tuning = {
        "inference": "mlp",
        "parameters": space,
        "objective": {"goal": "cheapest", "latencyP99": SLO, "rate": args.rate},
        "load": {"body": body, "warmup": args.warmup, "duration": args.duration},
        "sampler": "grid",
        "seed": 0,
        "trials": len(CPUS) * len(MEMORIES) * len(THREADS),
        "placementTimeout": 600,
    }
    # the node declares 4 cores (the host has 2): the service's idle replica (250m) and a
    # trial of 2 cores both fit, and the trial's quota is what limits it
    api.post("/api/v1/tunings", document("Tuning", "mlp-grid", tuning))
    began = time.monotonic()
    view = api.until(
        "/api/v1/tunings/mlp-grid", lambda v: v["phase"] != "Running", "the grid measured", 7200
    )
    points = []
    for trial in view["trials"]:
        measured = trial["state"] == "Complete" and trial["metrics"]
        points.append(
            {
                "params": {
                    "cpu": trial["params"]["cpu"],
                    "memory": trial["params"]["memory"],
                    "OMP_NUM_THREADS": trial["params"]["OMP_NUM_THREADS"],
                },
                "results": trial["metrics"] if measured else [],
                "failed": None if measured else f"{trial['state']}: {trial['message']}",
            }
        )
    return {
        "format": "phalanx/tuning-grid/v1",
        "synthetic": False,
        "about": (
            f"bench/tuning_grid.py on {time.strftime('%Y-%m-%d')}: phalanx.examples.tuning_model "
            f"(256-2048x3-10 MLP) served by the torchscript runtime, {INSTANCES} instances a "
            f"request, one replica at a time on a 2-core host (cgroup v1 CPU quota and memory "
            f"limit), {args.warmup:g} s warm-up, {args.duration:g} s at {args.rate:g} req/s "
            f"open loop; {time.monotonic() - began:.0f} s for the whole grid"
        ),
        "space": [
            {"name": p["name"], "category": p["category"], "kind": p["type"], "values": p["values"]}
            for p in space
        ],
        "base": {},
        "objective": {"goal": "cheapest", "latencyP99": SLO, "maxErrorRate": 0.01},
        "load": {"rates": [args.rate], "duration": args.duration, "arrival": "uniform"},
        "points": points,
    }


def chart(truth_path: Path, out: Path) -> None:
    """Draw the measured grid as the console draws a tuning (cost against p99, the SLO
    line, the cheapest spec within it marked) into ``out``, an SVG file."""
    from phalanx.client import TrialView, TuningView
    from phalanx.tuning.objective import Prices
    from phalanx.web.tuning_chart import svg_of, trial_chart

    truth = json.loads(truth_path.read_text())
    slo = truth["objective"]["latencyP99"]
    prices = Prices()
    trials = []
    for number, point in enumerate(truth["points"]):
        params = point["params"]
        cost = prices.cost({"cpu": params["cpu"], "memory": params["memory"]})
        result = point["results"][-1]
        feasible = (
            result["p99"] is not None and result["p99"] <= slo and result["error_rate"] <= 0.01
        )
        trials.append(
            TrialView(
                number=number,
                params=params,
                state="Complete",
                message="",
                job=None,
                node=None,
                metrics=point["results"],
                cost=cost,
                value=cost,
                feasible=feasible,
                created_at=0.0,
                ended_at=0.0,
            )
        )
    best = min((t for t in trials if t.feasible), key=lambda t: (t.cost or 0.0, t.number))
    view = TuningView(
        name="grid", user="bench", phase="Succeeded", message="", trials=trials, best=best,
        document={"spec": {"objective": {"goal": "cheapest", "latencyP99": slo}}},
        created_at=0.0, updated_at=0.0, ended_at=0.0,
    )  # fmt: skip
    title = f"{len(trials)} specs measured: cost against p99 at {truth['load']['rates'][0]:g} req/s"
    out.write_text(svg_of(trial_chart(view), title=title))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("bench/data/tuning_grid.json"))
    parser.add_argument(
        "--chart", type=Path, default=None, help="only draw --out's grid into this SVG file"
    )
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if args.chart is not None:
        chart(args.out, args.chart)
        return
    tmp = Path(tempfile.mkdtemp(prefix="phalanx-tuning-grid-"))
    (tmp / "cluster.yaml").write_text(CLUSTER)
    (port,) = free_ports(1)
    command = [
        str(Path(sys.executable).with_name("phalanx")), "up", "--data-dir", str(tmp / "data"),
        "--port", str(port), "--cluster", str(tmp / "cluster.yaml"), "--shared-identity",
    ]  # fmt: skip
    with (tmp / "phalanx.log").open("ab") as log:
        server = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        if not wait_answering(url, server, 60):
            raise RuntimeError((tmp / "phalanx.log").read_text()[-2000:])
        api = Api(url, (tmp / "data" / "admin.token").read_text().strip())
        truth = measure(api, args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(truth, indent=1) + "\n")
        measured = sum(1 for p in truth["points"] if p["failed"] is None)
        print(
            json.dumps({"out": str(args.out), "points": len(truth["points"]), "measured": measured})
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
