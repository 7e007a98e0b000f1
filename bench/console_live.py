"""What open console pages cost the server; prints one JSON object.

    .venv/bin/python bench/console_live.py [JOBS] [SECONDS] [PAGES]   # 10000 30 50

Starts ``phalanx up``'s server as a separate process (SQLite, the local executor; see
``control.server``), submits JOBS one-task jobs through the API (16 concurrent clients:
there is no bulk submission route) to a queue whose capability holds none of them, so
every job stays live and waiting (the admin page's waiting list and the jobs list are
at their largest). Then PAGES open pages poll their fragments as ``console.js`` does (the
next request ``data-every`` ms after the previous answer; the pages: 40% jobs lists,
40% job pages, each with its log following at 1 s, 20% admin pages), all logged in as
the admin (who sees every job), for SECONDS. Meanwhile, and before for as long idle, a
probe times the API's ``GET /api/v1/jobs?limit=100`` every 0.2 s.

Figures: fragment requests served per second, their p50/p99 latency, the server
process's CPU seconds per wall second (idle, and under the pages' load), and the
probe's p50/p99 idle and under load.
"""

from __future__ import annotations

import json
import random
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psutil

from control import cluster, job, queue, server  # the sibling benchmark's helpers

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
REFRESH = {"X-Phalanx-Refresh": "1"}


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def _login(url: str, token: str) -> httpx.Client:
    visitor = httpx.Client(base_url=f"{url}/ui", timeout=60, follow_redirects=False)
    page = visitor.get("/login").text
    found = _CSRF.search(page)
    assert found is not None
    answer = visitor.post(
        "/login", data={"token": token, "csrf": found.group(1)}, headers={"Origin": url}
    )
    assert answer.status_code == 303, answer.text[:500]
    return visitor


def _pages(count: int, job_names: list[str]) -> list[list[tuple[str, float]]]:
    """Each page's polled fragments: (path, every seconds)."""
    pages = []
    for i in range(count):
        kind = i % 5
        if kind in (0, 1):
            pages.append([("/fragments/jobs", 2.0)])
        elif kind in (2, 3):
            name = random.choice(job_names)
            pages.append(
                [
                    (f"/fragments/jobs/{name}", 2.0),
                    (f"/fragments/jobs/{name}/logs?task={name}-main-0&stream=stdout", 1.0),
                ]
            )
        else:
            pages.append([("/fragments/admin", 2.0)])
    return pages


class _Probe(threading.Thread):
    """Times ``GET /api/v1/jobs?limit=100`` every 0.2 s until stopped."""

    def __init__(self, client: httpx.Client) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.times: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            self.client.get("/api/v1/jobs", params={"limit": 100}).raise_for_status()
            self.times.append(time.perf_counter() - started)
            self.stop.wait(0.2)


def _poll(
    visitor: httpx.Client, path: str, every: float, until: float, out: list[tuple[float, int]]
) -> None:
    time.sleep(random.uniform(0, every))  # pages opened at different times
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            status = visitor.get(path, headers=REFRESH).status_code
        except httpx.HTTPError:
            status = 0
        out.append((time.perf_counter() - started, status))
        time.sleep(every)


def _probe_for(client: httpx.Client, seconds: float) -> list[float]:
    probe = _Probe(client)
    probe.start()
    time.sleep(seconds)
    probe.stop.set()
    probe.join()
    return probe.times


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main(jobs: int, seconds: float, pages: int) -> None:
    random.seed(7)
    with server(cluster(4, 64, gpus=8)) as client:
        client.post("/api/v1/queues", json=queue("bench", capability={"cpu": 1})).raise_for_status()
        names = [f"job-{i}" for i in range(jobs)]
        started = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            codes = list(
                pool.map(
                    lambda n: (
                        client.post("/api/v1/jobs", json=job(n, "bench", "true", cpu=2)).status_code
                    ),
                    names,
                )
            )
        submit_seconds = time.perf_counter() - started
        assert codes.count(201) == jobs, {c: codes.count(c) for c in set(codes)}
        time.sleep(3)  # the controller takes the jobs in
        serving = psutil.Process(client.server_pid)  # type: ignore[attr-defined]
        url = str(client.base_url).rstrip("/")
        token = client.headers["Authorization"].removeprefix("Bearer ")

        cpu, wall = _cpu(serving), time.monotonic()
        idle = _probe_for(client, min(10.0, seconds))
        idle_cpu = (_cpu(serving) - cpu) / (time.monotonic() - wall)

        visitors = [_login(url, token) for _ in range(pages)]
        answers: list[tuple[float, int]] = []
        until = time.monotonic() + seconds
        threads = [
            threading.Thread(target=_poll, args=(visitor, path, every, until, answers), daemon=True)
            for visitor, polled in zip(visitors, _pages(pages, names), strict=True)
            for path, every in polled
        ]
        cpu, wall = _cpu(serving), time.monotonic()
        probe = _Probe(client)
        probe.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        probe.stop.set()
        probe.join()
        elapsed = time.monotonic() - wall
        load_cpu = (_cpu(serving) - cpu) / elapsed
        for visitor in visitors:
            visitor.close()
        latencies = [t for t, status in answers if status == 200]
        print(
            json.dumps(
                {
                    "bench": "console-live",
                    "jobs": jobs,
                    "submit_per_s": round(jobs / submit_seconds, 1),
                    "pages": pages,
                    "seconds": round(elapsed, 1),
                    "fragments": len(answers),
                    "fragments_failed": sum(1 for _, status in answers if status != 200),
                    "fragments_per_s": round(len(answers) / elapsed, 1),
                    "fragment_p50_ms": round(1000 * _pct(latencies, 50), 1),
                    "fragment_p99_ms": round(1000 * _pct(latencies, 99), 1),
                    "server_cpu_per_s_idle": round(idle_cpu, 3),
                    "server_cpu_per_s_load": round(load_cpu, 3),
                    "api_jobs_p50_ms_idle": round(1000 * _pct(idle, 50), 1),
                    "api_jobs_p99_ms_idle": round(1000 * _pct(idle, 99), 1),
                    "api_jobs_p50_ms_load": round(1000 * _pct(probe.times, 50), 1),
                    "api_jobs_p99_ms_load": round(1000 * _pct(probe.times, 99), 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    arguments: list[Any] = sys.argv[1:]
    main(
        int(arguments[0]) if arguments else 10_000,
        float(arguments[1]) if len(arguments) > 1 else 30.0,
        int(arguments[2]) if len(arguments) > 2 else 50,
    )
