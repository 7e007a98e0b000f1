"""A job reading a 2 GiB dataset three ways, in one run: cold (its node copies it from
S3 first), warm (from the node's cache) and straight from local disk. Prints JSON.

    .venv/bin/python bench/datasets.py [--files 64] [--file-mib 32] [--rounds 5]

The S3 endpoint is moto's standalone server (a real HTTP S3 implementation) on a
loopback port; phalanx runs as a real ``phalanx up`` server (SQLite, the local
executor) over a temporary data dir, with that endpoint as its operator setting. The
dataset is ``--files`` files of ``--file-mib`` MiB of random bytes under one prefix;
the same files are written to a directory on local disk.

Every job runs one task (cpu 1) whose command reads every file of its directory in
8 MiB chunks and prints the bytes and the seconds that took. The figures, per way:

- ``read_s``: the task's own read time (what the issue compares: warm against local);
- ``job_s``: from the job's submission to its Succeeded, as a client sees it (cold:
  the copy from S3 included, scheduling and process start in all three).

Each round times warm and local once each (alternating which goes first) and, for the
first ``--cold-rounds`` rounds, a cold read too: a small marker file added under the
prefix and the dataset listed again makes a new listing (a new digest), which the node
copies whole. With ``--drop-caches`` (root) the page cache is dropped before each read,
so both warm and local read from the disk; without it both read files the run just
wrote, mostly from the page cache. Medians are reported with every sample.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import httpx

from phalanx.benchmarks.serving import wait_answering
from phalanx.executors.rendezvous import free_ports

BUCKET: Final = "phalanx-bench"
PREFIX: Final = "imagenet-slice"
#: Reads every file under argv[1] in 8 MiB chunks; prints "BYTES SECONDS".
READER: Final = (
    "import os, sys, time\n"
    "root, total, start = sys.argv[1], 0, time.perf_counter()\n"
    "for folder, _, names in os.walk(root):\n"
    "    for name in sorted(names):\n"
    "        with open(os.path.join(folder, name), 'rb', buffering=0) as f:\n"
    "            while chunk := f.read(8 << 20):\n"
    "                total += len(chunk)\n"
    "print(total, time.perf_counter() - start)\n"
)
CLUSTER: Final = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: bench}
spec:
  nodeGroups:
  - name: node
    count: 1
    resources: {cpu: 4, memory: 16Gi}
"""


def _answering(url: str, process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether moto's server at ``url`` answers anything within ``seconds``."""
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, timeout=1)
            return True
        time.sleep(0.1)
    return False


def _start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=out, env=env, start_new_session=True)


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _drop_caches() -> bool:
    """Drop the page cache (root only); whether it was."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


class Bench:
    """The running endpoint and server, and what a round needs of them."""

    def __init__(self, tmp: Path, files: int, file_mib: int) -> None:
        self.tmp, self.files, self.file_mib = tmp, files, file_mib
        self.moto: subprocess.Popen[bytes] | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.local = tmp / "local"
        self.jobs = 0

    def start(self) -> None:
        moto_port, port = free_ports(2)
        moto = str(Path(sys.executable).with_name("moto_server"))
        self.s3_url = f"http://127.0.0.1:{moto_port}"
        base = {**os.environ, "AWS_ENDPOINT_URL": self.s3_url, "AWS_DEFAULT_REGION": "us-east-1"}
        self.moto = _start(
            [moto, "-H", "127.0.0.1", "-p", str(moto_port)], self.tmp / "moto.log", base
        )
        if not _answering(self.s3_url, self.moto, 30):
            raise RuntimeError((self.tmp / "moto.log").read_text()[-2000:])
        (self.tmp / "cluster.yaml").write_text(CLUSTER)
        quota = f"{4 * self.files * self.file_mib}Mi"
        command = [
            str(Path(sys.executable).with_name("phalanx")), "up", "--data-dir", str(self.tmp / "data"),
            "--port", str(port), "--cluster", str(self.tmp / "cluster.yaml"), "--shared-identity",
            "--data-cache", quota,
        ]  # fmt: skip
        self.server = _start(command, self.tmp / "phalanx.log", base)
        self.url = f"http://127.0.0.1:{port}"
        if not wait_answering(self.url, self.server, 60):
            raise RuntimeError((self.tmp / "phalanx.log").read_text()[-2000:])
        token = (self.tmp / "data" / "admin.token").read_text().strip()
        self.api = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def upload(self) -> None:
        """The dataset's files to S3 and to local disk (the same bytes)."""
        import s3fs

        fs = s3fs.S3FileSystem(
            key="bench", secret="bench", client_kwargs={"endpoint_url": self.s3_url}
        )
        fs.mkdir(BUCKET)
        self.local.mkdir()
        for i in range(self.files):
            data = os.urandom(self.file_mib << 20)
            fs.pipe_file(f"{BUCKET}/{PREFIX}/part-{i:04d}.bin", data)
            (self.local / f"part-{i:04d}.bin").write_bytes(data)
        self.fs = fs
        self._post(
            "/api/v1/queues",
            {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"parent": "root"}},
        )  # fmt: skip
        self._post(
            "/api/v1/secrets",
            {"apiVersion": "phalanx/v1", "kind": "Secret", "metadata": {"name": "s3"},
             "spec": {"stringData": {"key": "bench", "secret": "bench"}}},
        )  # fmt: skip
        self._post(
            "/api/v1/datasets",
            {"apiVersion": "phalanx/v1", "kind": "Dataset", "metadata": {"name": "slice"},
             "spec": {"source": f"s3://{BUCKET}/{PREFIX}", "secret": "s3"}},
        )  # fmt: skip
        self.digest = self._listed(None)

    def relist(self, marker: int) -> None:
        """A new listing of the same data (one marker file more): a new copy to make."""
        self.fs.pipe_file(f"{BUCKET}/{PREFIX}/marker-{marker}.txt", str(marker).encode())
        self._post("/api/v1/datasets/slice/refresh", None, expect=200)
        self.digest = self._listed(self.digest)

    def read(self, way: str) -> dict[str, float]:
        """Run one job reading the dataset (``way`` cold or warm) or the local copy."""
        self.jobs += 1
        name = f"{way}-{self.jobs}"
        target = str(self.local) if way == "local" else "$PHALANX_DATA_SLICE"
        role: dict[str, Any] = {
            "name": "reader",
            "replicas": 1,
            "resources": {"cpu": 1, "memory": "512Mi"},
            "command": ["sh", "-c", f'exec {sys.executable} -c "$0" "{target}"', READER],
        }
        if way != "local":
            role["datasets"] = ["slice"]
        document = {"apiVersion": "phalanx/v1", "kind": "Job", "metadata": {"name": name},
                    "spec": {"queue": "default", "roles": [role]}}  # fmt: skip
        began = time.perf_counter()
        self._post("/api/v1/jobs", document)
        while True:
            job = self._get(f"/api/v1/jobs/{name}")
            if job["phase"] in ("Succeeded", "Failed", "Cancelled"):
                break
            time.sleep(0.05)
        job_s = time.perf_counter() - began
        if job["phase"] != "Succeeded":
            raise RuntimeError(f"{name}: {job['phase']} {job.get('message')}")
        log = self.api.get(f"/api/v1/jobs/{name}/logs").text
        found = re.search(r"^(\d+) ([0-9.e-]+)$", log, re.MULTILINE)
        if found is None:
            raise RuntimeError(f"{name} printed no timing: {log[-500:]}")
        size = int(found.group(1))
        if size < self.files * (self.file_mib << 20):
            raise RuntimeError(f"{name} read {size} bytes only")
        return {"job_s": job_s, "read_s": float(found.group(2)), "bytes": size}

    def _listed(self, before: str | None) -> str:
        while True:
            view = self._get("/api/v1/datasets/slice")
            if view["phase"] == "Failed":
                raise RuntimeError(view["message"])
            if view["phase"] == "Ready" and view["digest"] != before:
                return str(view["digest"])
            time.sleep(0.1)

    def _post(self, path: str, body: Any, expect: int = 201) -> Any:
        answer = self.api.post(path, json=body)
        if answer.status_code != expect:
            raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text}")
        return answer.json() if answer.content else None

    def _get(self, path: str) -> Any:
        answer = self.api.get(path)
        answer.raise_for_status()
        return answer.json()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.api.close()
        _stop(self.server)
        _stop(self.moto)


def _summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "read_s": round(statistics.median(s["read_s"] for s in samples), 3),
        "job_s": round(statistics.median(s["job_s"] for s in samples), 3),
        "read_gib_per_s": round(
            statistics.median(s["bytes"] / s["read_s"] for s in samples) / (1 << 30), 2
        ),
        "samples": [{k: round(v, 3) for k, v in s.items() if k != "bytes"} for s in samples],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--file-mib", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold-rounds", type=int, default=2)
    parser.add_argument("--drop-caches", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="phalanx-datasets-"))
    bench = Bench(tmp, args.files, args.file_mib)
    ways: dict[str, list[dict[str, float]]] = {"cold": [], "warm": [], "local": []}
    dropped = False
    try:
        bench.start()
        bench.upload()
        for round_ in range(args.rounds):
            if round_ < args.cold_rounds:
                if round_ > 0:
                    bench.relist(round_)
                dropped = _drop_caches() if args.drop_caches else False
                ways["cold"].append(bench.read("cold"))
            order = ["warm", "local"] if round_ % 2 == 0 else ["local", "warm"]
            for way in order:
                dropped = _drop_caches() if args.drop_caches else False
                ways[way].append(bench.read(way))
    finally:
        bench.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    warm, local = _summary(ways["warm"]), _summary(ways["local"])
    report = {
        "benchmark": "dataset read: cold from S3, warm from the node cache, local disk",
        "dataset": {
            "files": args.files,
            "file_mib": args.file_mib,
            "gib": round(args.files * args.file_mib / 1024, 2),
        },
        "s3": "moto_server on 127.0.0.1 (s3fs)",
        "page_cache": "dropped before each read" if dropped else "warm (files just written)",
        "rounds": args.rounds,
        "cold": _summary(ways["cold"]),
        "warm": warm,
        "local": local,
        "warm_over_local_read": round(warm["read_s"] / local["read_s"], 3),
        "warm_over_local_job": round(warm["job_s"] / local["job_s"], 3),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
