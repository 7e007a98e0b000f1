"""The gateway against Ray Serve's proxy, side by side in one run (issue 38): the latency
each adds to a request over calling the replica directly (p50, p99) at 1, 16 and 64
requests in flight, and the most requests/s through one proxy process.

The same model answers in all three paths: a replica serving ``POST /predict`` (a tiny
JSON prediction) on its own port, called directly; the phalanx gateway (its own
process, one route to that replica); and a Ray Serve 2.60 deployment of the same
handler behind Ray Serve's HTTP proxy. One client (its own process, raw HTTP/1.1 with
keep-alive, so that it is not the bottleneck) keeps N requests in flight for a few
seconds per measurement, cycling direct, gateway and Ray Serve round after round so
that drift on this machine falls on all three alike. Prints JSON.

    make bench-serving    # or: .venv/bin/python bench/serving.py [--rounds 3] [--seconds 4]

Ray Serve runs from its own environment (``--rayserve-python``, default
``.venv-rayserve/bin/python``, which ``make bench-serving`` makes with ``ray[serve]``
2.60.0), so that its dependencies never move the project's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PREDICTION = b'{"prediction":[0.1,0.9],"model":"mnist:v1"}'
BODY = b'{"inputs":[[1.0,2.0,3.0,4.0]]}'
LEVELS = (1, 16, 64)
#: Fixed request rates of the open-loop runs (requests/s).
RATES = (100, 400)


# -- the three servers (each run as `serving.py <role> ...` in its own process) --------------


async def replica_app(scope: Any, receive: Any, send: Any) -> None:
    """The model: reads the request, answers the prediction."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": PREDICTION})


def run_replica(port: int) -> None:
    import uvicorn

    uvicorn.run(replica_app, host="127.0.0.1", port=port, log_level="error", access_log=False)


def run_gateway(port: int, replica_port: int) -> None:
    import uvicorn

    from phalanx.gateway.proxy import Access, Gateway
    from phalanx.gateway.routes import Predictor, Replica, Routes, Service

    routes = Routes()
    replica = Replica("bench-main-1", f"http://127.0.0.1:{replica_port}", "main")
    routes.replace({"bench": Service("bench", (Predictor("main", 100, (replica,)),))})

    async def allow(token: str | None, service: str) -> Access:
        return Access.ALLOWED

    gateway = Gateway(routes, authorize=allow, on_demand=lambda _: None)
    uvicorn.run(gateway, host="127.0.0.1", port=port, log_level="error", access_log=False)


def run_rayserve(port: int) -> None:
    import ray
    from ray import serve

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )

    @serve.deployment(max_ongoing_requests=1000)
    class Model:
        async def __call__(self, request: Any) -> Any:
            from starlette.responses import Response

            await request.body()
            return Response(PREDICTION, media_type="application/json")

    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(Model.bind(), route_prefix="/", name="bench")
    print("ready", flush=True)
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        time.sleep(0.2)
    serve.shutdown()
    ray.shutdown()


# -- the client -----------------------------------------------------------------------------


def _request(port: int, path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    """Send ``request`` on a kept-alive connection and read the whole answer; its status."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length, chunked = 0, False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        await reader.readexactly(length)
    return status


async def _one_connection(
    port: int, path: str, until: float, latencies: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = _request(port, path)
    try:
        while time.perf_counter() < until:
            started = time.perf_counter()
            status = await _exchange(reader, writer, request)
            if status != 200:
                errors.append(status)
            latencies.append(time.perf_counter() - started)
    finally:
        writer.close()


async def _open_loop(port: int, path: str, rate: float, seconds: float) -> dict[str, float]:
    """Requests sent on a fixed schedule whatever the answers do (open loop); each one's
    latency counts from when it was due, so a stall is not hidden by a waiting client."""
    request = _request(port, path)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    latencies: list[float] = []
    errors: list[int] = []

    async def one(due: float) -> None:
        connection = idle.pop() if idle else await asyncio.open_connection("127.0.0.1", port)
        status = await _exchange(*connection, request)
        latencies.append(time.perf_counter() - due)
        if status != 200:
            errors.append(status)
        idle.append(connection)

    began = time.perf_counter()
    tasks = []
    for i in range(int(rate * seconds)):
        due = began + i / rate
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.create_task(one(due)))
    await asyncio.gather(*tasks)
    for _, writer in idle:
        writer.close()
    latencies.sort()
    return {
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "requests_per_s": rate,
        "errors": float(len(errors)),
    }


async def _measure(port: int, path: str, in_flight: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors: list[int] = []
    warm = time.perf_counter() + 0.5
    await asyncio.gather(*(_one_connection(port, path, warm, [], []) for _ in range(in_flight)))
    began = time.perf_counter()
    until = began + seconds
    await asyncio.gather(
        *(_one_connection(port, path, until, latencies, errors) for _ in range(in_flight))
    )
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "requests_per_s": len(latencies) / elapsed,
        "errors": float(len(errors)),
    }


def run_client(targets: str, rounds: int, seconds: float) -> None:
    """Measure each target at each level, round after round; print the raw figures."""
    named = json.loads(targets)
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {f"{level} in flight": [] for level in LEVELS} | {f"{r}/s": [] for r in RATES}
        for name in named
    }
    for _ in range(rounds):
        for rate in RATES:
            for name, (port, path) in named.items():
                runs[name][f"{rate}/s"].append(asyncio.run(_open_loop(port, path, rate, seconds)))
        for level in LEVELS:
            for name, (port, path) in named.items():
                measured = asyncio.run(_measure(port, path, level, seconds))
                runs[name][f"{level} in flight"].append(measured)
    print(json.dumps(runs))


# -- the run --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listened on {port} within {timeout} s")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", nargs="?", default="bench")
    parser.add_argument("ports", nargs="*", default=[])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--targets", default="{}")
    parser.add_argument(
        "--rayserve-python",
        default=str(Path(__file__).resolve().parents[1] / ".venv-rayserve" / "bin" / "python"),
    )
    args = parser.parse_args()
    if args.role == "replica":
        run_replica(int(args.ports[0]))
    elif args.role == "gateway":
        run_gateway(int(args.ports[0]), int(args.ports[1]))
    elif args.role == "rayserve":
        run_rayserve(int(args.ports[0]))
    elif args.role == "client":
        run_client(args.targets, args.rounds, args.seconds)
    else:
        print(json.dumps(bench(args), indent=2))


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """Start the three servers, run the client, and report the medians of its rounds."""
    me = [sys.executable, str(Path(__file__).resolve())]
    replica_port, gateway_port, ray_port = _free_port(), _free_port(), _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started: list[subprocess.Popen[bytes]] = []
    try:
        replica = subprocess.Popen([*me, "replica", str(replica_port)], env=env)
        started.append(replica)
        gateway = subprocess.Popen([*me, "gateway", str(gateway_port), str(replica_port)], env=env)
        started.append(gateway)
        ray = subprocess.Popen(
            [args.rayserve_python, me[1], "rayserve", str(ray_port)],
            env=env,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        started.append(ray)
        for port, process in ((replica_port, replica), (gateway_port, gateway)):
            _wait_port(port, process, 60)
        assert ray.stdout is not None
        if ray.stdout.readline().strip() != b"ready":
            raise RuntimeError("Ray Serve did not start")
        _wait_port(ray_port, ray, 120)
        targets = {
            "direct": (replica_port, "/predict"),
            "phalanx": (gateway_port, "/bench/predict"),
            "rayserve": (ray_port, "/predict"),
        }
        measured = subprocess.run(
            [
                *me,
                "client",
                "--rounds",
                str(args.rounds),
                "--seconds",
                str(args.seconds),
                "--targets",
                json.dumps(targets),
            ],
            env=env,
            capture_output=True,
            check=True,
        )
    finally:
        for process in reversed(started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
    runs = json.loads(measured.stdout)
    report: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "seconds": args.seconds,
    }
    for name in ("direct", "phalanx", "rayserve"):
        report[name] = {}
        for load, samples in runs[name].items():
            figures = {
                key: round(_median([s[key] for s in samples]), 3)
                for key in ("p50_ms", "p99_ms", "requests_per_s", "errors")
            }
            if name != "direct":
                direct = report["direct"][load]
                figures["added_p50_ms"] = round(figures["p50_ms"] - direct["p50_ms"], 3)
                figures["added_p99_ms"] = round(figures["p99_ms"] - direct["p99_ms"], 3)
            report[name][load] = figures
    most = {
        name: max(report[name][f"{level} in flight"]["requests_per_s"] for level in LEVELS)
        for name in ("phalanx", "rayserve")
    }
    report["most_requests_per_s"] = {name: round(value) for name, value in most.items()}
    report["throughput_ratio"] = round(most["phalanx"] / most["rayserve"], 2)
    return report


if __name__ == "__main__":
    main()
