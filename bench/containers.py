"""Launch overhead of a container image on the local executor; prints one JSON object.

    .venv/bin/python bench/containers.py [N] [--image REF]

Runs ``true`` N times (default 20) one after another through a ``LocalExecutor``, on
the host and then in a container (podman's, or what ``detect_runtime`` finds), and
reports per task, in milliseconds: ``start_call`` (how long ``start`` takes to return:
what the controller's loop waits for; ``first_start_call`` alone, as only the first
start of an image asks the runtime whether the image is there) and ``start_to_exit``
(from calling ``start`` until ``poll`` reports EXITED), as p50, p90 and max; ``overhead_ms`` is the
container's p50 minus the host's. Without ``--image`` a busybox image is built from
Debian's busybox-static (as the tests do). Needs root (rootful podman).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from phalanx.engine.decisions import Bind
from phalanx.executors.base import TaskEventKind
from phalanx.executors.containers import ContainerRuntime, detect_runtime
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.local import LocalExecutor

BUSYBOX = Path("/bin/busybox")


def busybox_image(runtime: ContainerRuntime, scratch: Path) -> str:
    """A ``FROM scratch`` image holding static busybox as ``/bin/true`` and ``/bin/sh``."""
    tag = "localhost/phalanx-bench-busybox:" + hashlib.sha256(BUSYBOX.read_bytes()).hexdigest()[:12]
    if runtime.image_problem(tag) is None:
        return tag
    (scratch / "bin").mkdir(parents=True)
    shutil.copy2(BUSYBOX, scratch / "bin" / "busybox")
    for applet in ("sh", "true"):
        (scratch / "bin" / applet).symlink_to("busybox")
    (scratch / "Containerfile").write_text("FROM scratch\nCOPY bin /bin\n")
    subprocess.run(
        [runtime.client, "build", "-q", "-t", tag, str(scratch)], check=True, capture_output=True
    )
    return tag


def measure(data_dir: Path, runs: int, image: str | None) -> dict[str, Any]:
    """``runs`` sequential starts of ``true`` (in ``image``, if given)."""
    launches: dict[str, TaskLaunch] = {}
    now = 1000.0
    executor = LocalExecutor(data_dir, lambda bind: launches[bind.task], clock=lambda: now)
    calls, totals = [], []
    try:
        for i in range(runs):
            task = f"t{i}"
            launches[task] = TaskLaunch(
                job="bench",
                task=task,
                role="worker",
                index=0,
                node="n0",
                command=("true",),
                image=image,
            )
            bind = Bind(job="bench", task=task, role="worker", index=0, node="n0")
            began = time.perf_counter()
            executor.start([bind], now=now)
            calls.append(time.perf_counter() - began)
            while True:
                events = executor.poll(now=now)
                bad = [e for e in events if e.kind is TaskEventKind.FAILED_TO_START]
                if bad:
                    raise SystemExit(f"cannot start: {bad[0].message}")
                if any(e.kind is TaskEventKind.EXITED for e in events):
                    break
                time.sleep(0.001)
            totals.append(time.perf_counter() - began)
    finally:
        executor.close()
    return {
        "first_start_call": round(calls[0] * 1000, 1),  # the image is checked then
        "start_call": summary(calls),
        "start_to_exit": summary(totals),
    }


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50": round(statistics.median(ms), 1),
        "p90": round(ms[int(0.9 * (len(ms) - 1))], 1),
        "max": round(ms[-1], 1),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=20)
    parser.add_argument("--image")
    args = parser.parse_args(argv)
    runtime = detect_runtime()
    if runtime is None:
        raise SystemExit("no container runtime on this host (podman or docker)")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        image = args.image or busybox_image(runtime, root / "image")
        host = measure(root / "host", args.runs, None)
        container = measure(root / "container", args.runs, image)
    result = {
        "benchmark": "container launch overhead, local executor",
        "runtime": runtime.kind.value,
        "oci_runtime": runtime.oci_runtime or "default",
        "runs": args.runs,
        "command": "true",
        "host_ms": host,
        "container_ms": container,
        "overhead_ms": {
            key: round(container[key]["p50"] - host[key]["p50"], 1)
            for key in ("start_call", "start_to_exit")
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
