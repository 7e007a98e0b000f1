"""On a machine with NVIDIA GPUs: GPU telemetry end to end, on the real cards.

It starts a real ``phalanx up`` (this host as its one node, the local executor, GPUs
read every second through NVML), runs the DDP example on CUDA over NCCL with one rank
per card (two at most), and checks, while the job runs, that:

- every card of the job is read (utilisation and memory on ``/api/v1/nodes``) and
  given to the job's tasks, busy and holding memory;
- ``/api/v1/jobs/NAME/gpus`` attributes readings to each task of the job;
- ``/metrics`` exports ``DCGM_FI_DEV_GPU_UTIL`` and ``DCGM_FI_DEV_FB_USED`` with the
  job's ``job``, ``task``, ``user`` and ``queue`` labels;
- the job succeeds (its ranks agree on the weights).

It prints one JSON object with what it saw and ``ok``, and exits 0 when every check
passed, 1 when one failed, 2 on a machine without an NVIDIA GPU (nothing to check).

    make gpu-check            # or: .venv/bin/python bench/gpu_check.py [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from phalanx.benchmarks.serving import wait_answering
from phalanx.executors.gpus import nvidia_gpus

JOB = "gpu-check"
QUEUE = "gpu-check"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="training steps per rank")
    parser.add_argument("--width", type=int, default=8192, help="the model's hidden width")
    parser.add_argument("--keep", action="store_true", help="keep the data dir and the log")
    args = parser.parse_args()
    cards = nvidia_gpus()
    if not cards:
        print(json.dumps({"ok": False, "skipped": "no NVIDIA GPU or NVML on this machine"}))
        return 2
    ranks = min(len(cards), 2)
    tmp = Path(tempfile.mkdtemp(prefix="phalanx-gpu-check-"))
    server = None
    try:
        server, url = _start(tmp)
        token = (tmp / "data" / "admin.token").read_text().strip()
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as api:
            report = _check(api, ranks, args, [card.model for card in cards])
            report["log_tail"] = (tmp / "server.log").read_text()[-1500:]
        print(json.dumps(report, indent=2))
        return 0 if report["ok"] else 1
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(timeout=60)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _start(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        str(Path(sys.executable).with_name("phalanx")),
        "up",
        "--data-dir",
        str(tmp / "data"),
        "--port",
        str(port),
        "--shared-identity",
        "--gpu-interval",
        "1",
    ]
    log = (tmp / "server.log").open("ab")
    process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    if wait_answering(url, process, 60):
        return process, url
    raise RuntimeError(f"phalanx up did not answer: {(tmp / 'server.log').read_text()[-2000:]}")


def _check(
    api: httpx.Client, ranks: int, args: argparse.Namespace, models: list[str]
) -> dict[str, Any]:
    api.post("/api/v1/queues", json=_queue()).raise_for_status()
    command = [
        sys.executable, "-m", "phalanx.examples.ddp_train", "--device", "cuda",
        "--steps", str(args.steps), "--width", str(args.width),
    ]  # fmt: skip
    api.post("/api/v1/jobs", json=_job(ranks, command)).raise_for_status()
    seen: dict[str, Any] = {"cards": {}, "tasks": {}, "metrics": []}
    deadline = time.monotonic() + 600
    phase = "Pending"
    while time.monotonic() < deadline:
        phase = api.get(f"/api/v1/jobs/{JOB}").json()["phase"]
        if phase in ("Succeeded", "Failed", "Cancelled"):
            break
        if phase == "Running":
            _look(api, seen)
        time.sleep(1.0)
    checks = {
        "cards_read_busy": len(seen["cards"]) == ranks
        and all(c["utilisation_peak"] > 0 and c["memory_peak"] > 0 for c in seen["cards"].values()),
        "tasks_attributed": len(seen["tasks"]) == ranks
        and all(t["utilisation_peak"] > 0 and t["memory_peak"] > 0 for t in seen["tasks"].values()),
        "metrics_labelled": any(f'job="{JOB}"' in line for line in seen["metrics"]),
        "job_succeeded": phase == "Succeeded",
    }
    summary = api.get(f"/api/v1/jobs/{JOB}/gpus").json().get("summary")
    return {
        "ok": all(checks.values()),
        "checks": checks,
        "gpus": models,
        "ranks": ranks,
        "phase": phase,
        "cards": seen["cards"],
        "tasks": seen["tasks"],
        "job_summary": summary,
        "metrics_sample": seen["metrics"][:6],
    }


def _look(api: httpx.Client, seen: dict[str, Any]) -> None:
    """Note the peaks of the job's cards, its tasks' readings and its metric lines."""
    for node in api.get("/api/v1/nodes").json():
        for gpu in node["gpus"]:
            if not any(task.startswith(JOB) for task in gpu["tasks"]):
                continue
            card = seen["cards"].setdefault(
                f"{node['name']}/{gpu['index']}", {"utilisation_peak": 0.0, "memory_peak": 0}
            )
            card["utilisation_peak"] = max(card["utilisation_peak"], gpu["utilisation"] or 0.0)
            card["memory_peak"] = max(card["memory_peak"], gpu["memory_used"] or 0)
            card["model"] = gpu["model"]
    for task in api.get(f"/api/v1/jobs/{JOB}/gpus").json()["tasks"]:
        mine = seen["tasks"].setdefault(task["task"], {"utilisation_peak": 0.0, "memory_peak": 0})
        mine["utilisation_peak"] = max(mine["utilisation_peak"], task["utilisation"])
        mine["memory_peak"] = max(mine["memory_peak"], task["memory"])
        mine["gpus"] = task["gpus"]
    lines = api.get("/metrics").text.splitlines()
    labelled = [
        line
        for line in lines
        if line.startswith(("DCGM_FI_DEV_GPU_UTIL{", "DCGM_FI_DEV_FB_USED{"))
        and f'job="{JOB}"' in line
    ]
    if labelled:
        seen["metrics"] = labelled


def _queue() -> dict[str, Any]:
    return {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": QUEUE}, "spec": {}}


def _job(ranks: int, command: list[str]) -> dict[str, Any]:
    role = {
        "name": "worker",
        "replicas": ranks,
        "resources": {"cpu": 1, "memory": "4Gi", "gpu": 1},
        "command": command,
    }
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": JOB},
        "spec": {"queue": QUEUE, "roles": [role]},
    }


if __name__ == "__main__":
    sys.exit(main())
