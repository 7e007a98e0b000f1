"""Scaling of inference services, phalanx against Ray Serve 2.60, side by side in one run:
the time to the first answer from zero replicas, and the time from a 10x burst of load to
the new replicas serving it. Prints JSON.

    .venv/bin/python bench/serving_scale.py [--rounds 3] [--service-time 0.4] [--keep]

Both serve the same tiny model: ``POST .../predict`` sleeps the service time (asyncio, so
a replica serves its requests at once) and answers a small JSON prediction; ``GET
/healthz`` answers 200; ``GET .../timeline`` says when the replica's process started and
when it was ready (listening, or its constructor done), for the breakdown of a cold
start. phalanx runs as a real ``phalanx up`` server over a temporary data dir (its
replicas are command replicas: this file, role ``replica``, under uvicorn, with cpu 500m
and memory 256Mi); Ray Serve runs from its own environment (``--rayserve-python``,
default ``.venv-rayserve/bin/python``) in a subprocess that this one drives over its
stdin and stdout, its replicas asking for 0.5 CPU.

- **From zero.** A service whose replicas are at zero (phalanx: a ``minReplicas: 0``
  predictor after its idle grace; Ray Serve: ``min_replicas: 0``, ``initial_replicas: 0``,
  after it scaled to zero) is sent one request on a fresh connection; the figure is the
  time to its answer (this model answers at once: no service time). A first one
  (``warmup``: the first replica ever) is reported apart from the rounds.
- **Burst.** A fresh service of one replica carries 2 requests in flight (1x, closed
  loop; phalanx aims a replica at 70% of its ``scaleTarget`` of 4, so 2 keep one
  replica), then 20; the figures are the times from the burst's start until the
  replicas the load asks for (8) exist (requested), until they are Ready (phalanx: the
  API's ``ready``; Ray Serve: replicas ``RUNNING`` in ``serve.status()``), and until the
  p50 latency of the requests sent falls back under twice the 1x p50 for good (0.5 s
  windows by when a request was sent). The service time (0.4 s) keeps the 10x load (50
  requests/s) well below what Ray Serve's proxy carries on 2 cores (about 100/s,
  docs/benchmarks/serving.md), so that the figures are about scaling.
- ``control_cpu_s``: the CPU seconds the serving system's own processes (all but the
  replicas: phalanx's server and launcher; Ray's driver, GCS, raylet, controller, proxy
  and idle workers) used meanwhile.

Each round runs both bursts (alternating which goes first), waits until both cold
services are back at zero, then times both from zero. Both autoscalers are set alike:
the same in-flight target per replica, concurrency limit, most replicas, sampling
period and averaging window; the report lists every setting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    import httpx

SCRIPT: Final = str(Path(__file__).resolve())
PREDICTION: Final = b'{"prediction":[0.1,0.9],"model":"tiny:v1"}'
BODY: Final = b'{"inputs":[[1.0,2.0,3.0,4.0]]}'
#: The line prefix of the Ray Serve subprocess's answers on its stdout.
MARK: Final = b"@@ "
#: The Ray Serve deployment's name in each application.
DEPLOYMENT: Final = "model"
#: Replica states of Ray Serve that are not on their way out.
RAY_LIVE: Final = ("STARTING", "UPDATING", "RECOVERING", "RUNNING", "PENDING_MIGRATION")
#: Logical CPUs of both clusters (phalanx's virtual node, Ray's ``num_cpus``).
CLUSTER_CPUS: Final = 8
REPLICA_CPU: Final = 0.5
REPLICA_MEMORY: Final = "256Mi"
#: How often the bench reads the replica counts during a burst.
POLL: Final = 0.25
#: After the wanted replicas are Ready and the p50 has recovered, the burst goes on this long.
SETTLE: Final = 3.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """One run's load and both autoscalers' shared settings."""

    rounds: int = 3
    service_time: float = 0.4  # seconds each request takes at the replica
    concurrency: int = 4  # phalanx concurrency; Ray Serve max_ongoing_requests
    scale_target: float = 4.0  # phalanx scaleTarget (Ray's target: this x utilization)
    # phalanx's own constants (``main`` reads them from its modules):
    utilization: float = 0.7  # the KPA's target utilization (autoscale.UTILIZATION)
    base: int = 2  # requests in flight at 1x
    factor: int = 10
    max_replicas: int = 8
    steady: float = 6.0  # seconds of 1x load before the burst
    burst: float = 40.0  # the burst lasts at most this long
    window: float = 0.5  # seconds per latency window
    look_back: float = 6.0  # phalanx's panic window; Ray Serve's look_back_period_s
    idle_grace: float = 30.0  # phalanx's scale-to-zero grace; Ray's downscale_to_zero_delay_s

    @property
    def wanted(self) -> int:
        """The replicas the burst's load asks for, in both autoscalers."""
        per_replica = self.scale_target * self.utilization
        return min(self.max_replicas, math.ceil(self.base * self.factor / per_replica))

    def ray_autoscaling(self, *, cold: bool) -> dict[str, Any]:
        """Ray Serve's ``autoscaling_config``: Ray's defaults but for these."""
        if cold:
            bounds = {"min_replicas": 0, "initial_replicas": 0, "max_replicas": 1}
        else:
            bounds = {"min_replicas": 1, "initial_replicas": 1, "max_replicas": self.max_replicas}
        return {
            **bounds,
            "target_ongoing_requests": self.scale_target * self.utilization,
            "upscale_delay_s": 0.0,  # default 30: phalanx's panic mode acts at once
            "look_back_period_s": self.look_back,  # default 30
            "metrics_interval_s": 1.0,  # default 10: phalanx samples every second
            "downscale_to_zero_delay_s": self.idle_grace,
        }

    def phalanx_predictor(self, *, cold: bool) -> dict[str, Any]:
        """The phalanx predictor (its ``command``, ``modelVersion`` and ``env`` aside)."""
        return {
            "resources": {"cpu": f"{int(REPLICA_CPU * 1000)}m", "memory": REPLICA_MEMORY},
            "minReplicas": 0 if cold else 1,
            "maxReplicas": 1 if cold else self.max_replicas,
            "concurrency": self.concurrency,
            "scaleTarget": self.scale_target,
        }


# -- the model, the same on both sides --------------------------------------------------------


def process_started() -> float:
    """When this process started (wall clock, to about 10 ms), from /proc."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def control_cpu(session: int) -> dict[int, float]:
    """The CPU seconds (user and system) each process of ``session``, or child of its
    leader, has used, but for the replicas: what a serving system's own processes cost
    (phalanx's launcher is the server's child in a session of its own)."""
    used = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if session not in (int(fields[1]), int(fields[3])):  # parent, session
                continue
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if b"ServeReplica" in cmdline or SCRIPT.encode() + b"\0replica" in cmdline:
            continue
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """The CPU seconds the processes of ``after`` used since ``before``."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


async def answer(path: str, service_time: float, timeline: dict[str, float]) -> tuple[int, bytes]:
    """The model's answer to a request for ``path`` (its body already read)."""
    if path == "/healthz":
        return 200, b"ok"
    if path.endswith("/timeline"):
        return 200, json.dumps(timeline).encode()
    await asyncio.sleep(service_time)
    return 200, PREDICTION


def run_replica() -> None:
    """A phalanx command replica: the model under uvicorn on $PORT."""
    timeline = {"process": process_started()}
    import uvicorn

    service_time = float(os.environ["SERVICE_TIME"])

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    timeline["ready"] = time.time()  # uvicorn listens right after this
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        status, body = await answer(scope["path"], service_time, timeline)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    port = int(os.environ["PORT"])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


def run_rayserve(port: int, cpus: int) -> None:
    """Ray Serve on this machine, driven by JSON commands on stdin (``deploy``,
    ``replicas``, ``delete``, ``stop``), each answered by a line on stdout after ``MARK``."""
    import ray
    from ray import serve

    ray.init(
        address="local",
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )

    @serve.deployment
    class Model:
        def __init__(self, service_time: float) -> None:
            self.timeline = {"process": process_started()}
            self.service_time = service_time
            self.timeline["ready"] = time.time()

        async def __call__(self, request: Any) -> Any:
            from starlette.responses import Response

            await request.body()
            status, body = await answer(request.url.path, self.service_time, self.timeline)
            return Response(body, status_code=status, media_type="application/json")

    def say(message: dict[str, Any]) -> None:
        sys.stdout.buffer.write(MARK + json.dumps(message).encode() + b"\n")
        sys.stdout.flush()

    serve.start(http_options={"host": "127.0.0.1", "port": port})
    say({"ready": True})
    try:
        for line in sys.stdin:
            command = json.loads(line)
            op = command["op"]
            try:
                if op == "deploy":
                    app = Model.options(  # type: ignore[attr-defined]
                        name=DEPLOYMENT,
                        max_ongoing_requests=command["max_ongoing_requests"],
                        autoscaling_config=command["autoscaling"],
                        ray_actor_options={"num_cpus": command["num_cpus"]},
                    ).bind(command["service_time"])
                    serve.run(app, name=command["name"], route_prefix=f"/{command['name']}")
                    say({"ok": True})
                elif op == "replicas":
                    found = serve.status().applications.get(command["name"])
                    states = {}
                    if found is not None and DEPLOYMENT in found.deployments:
                        states = {
                            str(getattr(state, "value", state)): count
                            for state, count in found.deployments[DEPLOYMENT].replica_states.items()
                        }
                    say({"states": states})
                elif op == "delete":
                    serve.delete(command["name"])
                    say({"ok": True})
                elif op == "stop":
                    break
            except Exception as error:
                say({"error": f"{type(error).__name__}: {error}"})
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
        say({"stopped": True})


# -- the client ---------------------------------------------------------------------------------


def _request(port: int, path: str, token: str | None, *, method: str = "POST") -> bytes:
    body = BODY if method == "POST" else b""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes]:
    """Send ``request`` on a kept-alive connection; the answer's status and body."""
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
    if not chunked:
        return status, await reader.readexactly(length)
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        parts.append((await reader.readexactly(size + 2))[:-2])
        if size == 0:
            return status, b"".join(parts)


async def _once(port: int, request: bytes, timeout: float = 90.0) -> tuple[int, bytes]:
    """``request`` on a connection of its own."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await asyncio.wait_for(_exchange(reader, writer, request), timeout)
    finally:
        writer.close()


@dataclass(slots=True)
class Load:
    """Closed-loop load: each worker sends its next request when the last is answered."""

    port: int
    request: bytes
    #: (when sent, perf_counter; latency; status) of every request answered
    samples: list[tuple[float, float, int]] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    workers: list[asyncio.Task[None]] = field(default_factory=list)

    def add(self, count: int) -> None:
        self.workers += [asyncio.create_task(self._worker()) for _ in range(count)]

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.workers)

    async def _worker(self) -> None:
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while not self.stopping.is_set():
            sent = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection("127.0.0.1", self.port)
                status, _ = await _exchange(*connection, self.request)
            except (OSError, asyncio.IncompleteReadError):
                status = 0
                if connection is not None:
                    connection[1].close()
                connection = None
                await asyncio.sleep(0.1)
            self.samples.append((sent, time.perf_counter() - sent, status))
        if connection is not None:
            connection[1].close()


# -- the two sides ------------------------------------------------------------------------------


class Side(Protocol):
    """One serving system, as the rounds drive it."""

    name: str
    port: int
    token: str | None
    session: int  # the session id of its processes

    def path(self, service: str) -> str: ...

    async def deploy(self, service: str, *, cold: bool) -> None:
        """Create ``service``; return once it has its first replicas Ready (none: cold)."""

    async def replicas(self, service: str) -> tuple[int, int]:
        """``service``'s replicas: (not on their way out, Ready)."""

    async def remove(self, service: str) -> None:
        """Delete ``service``; return once its replicas are gone."""

    async def breakdown(self, service: str, sent: float) -> dict[str, float]:
        """Where the cold start of ``service``'s request sent at ``sent`` went."""


async def _timeline(side: Side, service: str) -> dict[str, float]:
    status, body = await _once(
        side.port, _request(side.port, side.path(service) + "timeline", side.token, method="GET")
    )
    if status != 200:
        raise RuntimeError(f"{side.name}: timeline answered {status}: {body[:200]!r}")
    timeline: dict[str, float] = json.loads(body)
    return timeline


class Phalanx:
    """A ``phalanx up`` server over its API and its gateway."""

    name = "phalanx"

    def __init__(
        self, url: str, token: str, settings: Settings, api: httpx.AsyncClient, session: int
    ) -> None:
        self.session = session  # the server's (its launcher is its child)
        self.port = int(url.rsplit(":", 1)[1])
        self.token: str | None = token
        self.settings = settings
        self.api = api

    def path(self, service: str) -> str:
        return f"/serve/{service}/"

    async def _call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        answer = await self.api.request(method, path, json=body)
        if answer.status_code != expect:
            raise RuntimeError(f"phalanx: {method} {path}: {answer.status_code} {answer.text}")
        return answer.json() if answer.content else None

    async def register_model(self) -> None:
        """A queue, and version 1 of model ``tiny`` from a training job."""
        queue = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "bench"}}
        await self._call("POST", "/api/v1/queues", {**queue, "spec": {}}, 201)
        trainer = {
            "name": "trainer",
            "replicas": 1,
            "resources": {"cpu": "500m", "memory": "256Mi"},
            "command": ["sh", "-c", "mkdir -p model && printf 'tiny' > model/w.bin"],
            "model": {"name": "tiny", "path": "model"},
        }
        job = {
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {"queue": "bench", "roles": [trainer]},
        }
        await self._call("POST", "/api/v1/jobs", job, 201)

        async def registered() -> bool:
            answer = await self.api.get("/api/v1/models/tiny/versions/1")
            return answer.status_code == 200

        await _until(registered, "model tiny:v1 registered", 60)

    async def deploy(self, service: str, *, cold: bool) -> None:
        predictor = {
            "name": "main",
            "modelVersion": "tiny",
            "command": [sys.executable, SCRIPT, "replica"],
            "env": {"SERVICE_TIME": str(0.0 if cold else self.settings.service_time)},
            **self.settings.phalanx_predictor(cold=cold),
        }
        document = {
            "apiVersion": "phalanx/v1",
            "kind": "Inference",
            "metadata": {"name": service},
            "spec": {"queue": "bench", "predictors": [predictor]},
        }
        await self._call("POST", "/api/v1/inferences", document, 201)
        if not cold:
            await _until(
                lambda: self._has_ready(service), f"phalanx: inference {service} Ready", 60
            )

    async def _has_ready(self, service: str) -> bool:
        return (await self.replicas(service))[1] >= 1

    async def replicas(self, service: str) -> tuple[int, int]:
        view = await self._call("GET", f"/api/v1/inferences/{service}")
        (predictor,) = view["predictors"]
        return len(predictor["replicas"]), int(predictor["ready"])

    async def remove(self, service: str) -> None:
        view = await self._call("GET", f"/api/v1/inferences/{service}")
        jobs = [r["job"] for p in view["predictors"] for r in p["replicas"]]
        await self._call("DELETE", f"/api/v1/inferences/{service}", expect=204)

        async def gone() -> bool:
            for job in jobs:
                if (await self.api.get(f"/api/v1/jobs/{job}")).status_code != 404:
                    return False
            return True

        await _until(gone, f"phalanx: the replicas of {service} gone", 60)

    async def breakdown(self, service: str, sent: float) -> dict[str, float]:
        view = await self._call("GET", f"/api/v1/inferences/{service}")
        replica = view["predictors"][0]["replicas"][0]
        job = await self._call("GET", f"/api/v1/jobs/{replica['job']}")
        timeline = await _timeline(self, service)
        launched = job["tasks"][0]["started_at"]  # None until the launcher's word is stored
        return {
            "job_submitted_s": job["created_at"] - sent,
            **({} if launched is None else {"task_started_s": launched - sent}),
            "process_started_s": timeline["process"] - sent,
            "replica_listening_s": timeline["ready"] - sent,
        }


class RayServe:
    """Ray Serve in its own environment's subprocess (``run_rayserve``)."""

    name = "rayserve"

    def __init__(self, process: asyncio.subprocess.Process, port: int, settings: Settings) -> None:
        self.process = process
        self.session = process.pid  # Ray's, and its controller's and proxy's
        self.port = port
        self.token: str | None = None
        self.settings = settings
        self._lock = asyncio.Lock()

    @classmethod
    async def start(cls, python: str, settings: Settings, log: Path) -> RayServe:
        port = _free_port()
        with log.open("ab") as err:
            process = await asyncio.create_subprocess_exec(
                python,
                SCRIPT,
                "rayserve",
                str(port),
                str(CLUSTER_CPUS),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        ray = cls(process, port, settings)
        await asyncio.wait_for(ray._answer(), 180)
        return ray

    async def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise RuntimeError("Ray Serve exited; see its log")
            if line.startswith(MARK):
                said: dict[str, Any] = json.loads(line[len(MARK) :])
                if "error" in said:
                    raise RuntimeError(f"Ray Serve: {said['error']}")
                return said

    async def call(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        async with self._lock:
            self.process.stdin.write(json.dumps(command).encode() + b"\n")
            await self.process.stdin.drain()
            return await self._answer()

    def path(self, service: str) -> str:
        return f"/{service}/"

    async def deploy(self, service: str, *, cold: bool) -> None:
        await self.call(
            op="deploy",
            name=service,
            autoscaling=self.settings.ray_autoscaling(cold=cold),
            max_ongoing_requests=self.settings.concurrency,
            num_cpus=REPLICA_CPU,
            service_time=0.0 if cold else self.settings.service_time,
        )

    async def replicas(self, service: str) -> tuple[int, int]:
        states: dict[str, int] = (await self.call(op="replicas", name=service))["states"]
        return sum(states.get(s, 0) for s in RAY_LIVE), states.get("RUNNING", 0)

    async def remove(self, service: str) -> None:
        await self.call(op="delete", name=service)

    async def breakdown(self, service: str, sent: float) -> dict[str, float]:
        timeline = await _timeline(self, service)
        return {
            "process_started_s": timeline["process"] - sent,
            "replica_ready_s": timeline["ready"] - sent,
        }

    async def stop(self) -> None:
        """Shut Serve and Ray down in the subprocess; kill its session after 60 s."""
        try:
            if self.process.returncode is None and self.process.stdin is not None:
                self.process.stdin.write(b'{"op": "stop"}\n')
                await self.process.stdin.drain()
                await asyncio.wait_for(self.process.wait(), 60)
        except (TimeoutError, OSError):
            pass
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: start_new_session
            await self.process.wait()


# -- the rounds ---------------------------------------------------------------------------------


async def _until(condition: Callable[[], Awaitable[bool]], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def from_zero(side: Side, service: str) -> dict[str, Any]:
    """One request to ``service`` at zero replicas; the time to its answer."""
    live, _ = await side.replicas(service)
    if live:
        raise RuntimeError(f"{side.name}: {service} has {live} replicas, not zero")
    request = _request(side.port, side.path(service) + "predict", side.token)
    cpu = control_cpu(side.session)
    sent = time.time()
    began = time.perf_counter()
    status, body = await _once(side.port, request)
    seconds = time.perf_counter() - began
    control = cpu_between(cpu, control_cpu(side.session))
    if status != 200:
        raise RuntimeError(f"{side.name}: the first request answered {status}: {body[:200]!r}")
    breakdown = await side.breakdown(service, sent)
    return (
        {"seconds": round(seconds, 3)}
        | {key: round(value, 3) for key, value in breakdown.items()}
        | {"answered_after_replica_ready_s": round(seconds - max(breakdown.values()), 3)}
        | {"control_cpu_s": round(control, 2)}
    )


async def burst(side: Side, service: str, settings: Settings) -> dict[str, Any]:
    """1x load on a fresh service of one replica, then 10x; when the replicas and the
    latency followed."""
    from phalanx.benchmarks.serving import median, reached_at, recovered_at

    await side.deploy(service, cold=False)
    load = Load(side.port, _request(side.port, side.path(service) + "predict", side.token))
    load.add(settings.base)
    await asyncio.sleep(settings.steady)
    before = await side.replicas(service)
    cpu = control_cpu(side.session)
    began = time.perf_counter()
    load.add(settings.base * (settings.factor - 1))
    baseline = median([s[1] for s in load.samples if began - settings.steady + 1 <= s[0] < began])
    if baseline is None:
        raise RuntimeError(f"{side.name}: no request answered at 1x")
    threshold = 2 * baseline
    live: list[tuple[float, int]] = []
    ready: list[tuple[float, int]] = []
    while (now := time.perf_counter() - began) < settings.burst:
        counts = await side.replicas(service)
        live.append((now, counts[0]))
        ready.append((now, counts[1]))
        done = reached_at(ready, settings.wanted)
        samples = [(s[0] - began, s[1]) for s in load.samples if s[0] >= began]
        recovered = recovered_at(samples, threshold=threshold, window=settings.window)
        if done is not None and recovered is not None and now - max(done, recovered) > SETTLE:
            break
        await asyncio.sleep(POLL)
    control = cpu_between(cpu, control_cpu(side.session))
    lasted = time.perf_counter() - began
    await load.stop()
    await side.remove(service)
    samples = [(s[0] - began, s[1]) for s in load.samples if s[0] >= began]
    seen = [(at, n, r) for (at, n), (_, r) in zip(live, ready, strict=True)]
    changes = [
        [round(at, 2), n, r]
        for i, (at, n, r) in enumerate(seen)
        if i == 0 or (n, r) != seen[i - 1][1:]
    ]

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return {
        "baseline_p50_ms": round(1000 * baseline, 1),
        "replicas_before_burst": before[1],
        "to_first_new_replica_s": rounded(reached_at(ready, before[1] + 1)),
        "to_wanted_replicas_requested_s": rounded(reached_at(live, settings.wanted)),
        "to_wanted_replicas_ready_s": rounded(reached_at(ready, settings.wanted)),
        "to_p50_recovered_s": rounded(
            recovered_at(samples, threshold=threshold, window=settings.window)
        ),
        "most_ready": max(count for _, count in ready),
        "burst_requests": len(samples),
        "burst_p50_ms": round(1000 * (median([s[1] for s in samples]) or 0.0), 1),
        "errors": sum(1 for s in load.samples if s[2] != 200),
        "burst_s": round(lasted, 1),
        "control_cpu_s": round(control, 1),  # in the burst, of its serving system's processes
        "replicas_over_time": changes,  # [seconds, live, Ready] at each change
    }


async def _wait_zero(sides: list[Side], service: str, timeout: float) -> None:
    async def at_zero() -> bool:
        counts = [await side.replicas(service) for side in sides]
        return all(live == 0 for live, _ in counts)

    await _until(at_zero, f"{service} back at zero replicas", timeout)


async def measure(sides: list[Side], settings: Settings) -> dict[str, Any]:
    """Warm both cold services up, then the rounds (see the module docstring)."""
    from phalanx.benchmarks.serving import median

    cold: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
    bursts: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
    warmup = {side.name: await from_zero(side, "cold") for side in sides}
    for number in range(settings.rounds):
        order = sides if number % 2 == 0 else sides[::-1]
        for side in order:
            bursts[side.name].append(await burst(side, f"burst{number}", settings))
        await _wait_zero(sides, "cold", 3 * settings.idle_grace)
        await asyncio.sleep(2)  # the last replicas' processes gone
        for side in order:
            cold[side.name].append(await from_zero(side, "cold"))

    def summary(runs: list[dict[str, Any]], key: str) -> float | None:
        values = [run[key] for run in runs if run[key] is not None]
        middle = median(values) if len(values) == len(runs) else None  # a miss: no median
        return None if middle is None else round(middle, 3)

    report: dict[str, Any] = {"from_zero": {}, "burst": {}}
    for side in sides:
        report["from_zero"][side.name] = {
            "median_s": summary(cold[side.name], "seconds"),
            "rounds": cold[side.name],
            "warmup": warmup[side.name],
        }
        runs = bursts[side.name]
        report["burst"][side.name] = {
            key.replace("to_", "median_to_"): summary(runs, key)
            for key in (
                "to_first_new_replica_s",
                "to_wanted_replicas_requested_s",
                "to_wanted_replicas_ready_s",
                "to_p50_recovered_s",
            )
        } | {"rounds": runs}
    return report


# -- the run ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


CLUSTER: Final = f"""\
apiVersion: phalanx/v1
kind: Cluster
metadata: {{name: bench}}
spec:
  nodeGroups:
  - name: node
    count: 1
    resources: {{cpu: {CLUSTER_CPUS}, memory: 16Gi}}
"""


def _start_phalanx(tmp: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    from phalanx.benchmarks.serving import wait_answering

    cluster = tmp / "cluster.yaml"
    cluster.write_text(CLUSTER)
    port = _free_port()
    command = [
        str(Path(sys.executable).with_name("phalanx")),
        "up",
        "--data-dir",
        str(tmp / "data"),
        "--port",
        str(port),
        "--cluster",
        str(cluster),
        "--shared-identity",
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    if not wait_answering(url, process, 60):
        raise RuntimeError(f"phalanx up did not answer: {log.read_text()[-2000:]}")
    return process, url


def _kill_leftovers(tmp: Path) -> list[int]:
    """Kill (by pid) what still runs from ``tmp``: a replica or launcher that outlived
    its server. Only processes whose command line or directory is in ``tmp``, which this
    run made."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(tmp) in cmdline or cwd.startswith(str(tmp)):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


async def bench(settings: Settings, rayserve_python: str, keep: bool) -> dict[str, Any]:
    """Start both, measure, stop both (and everything they started)."""
    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="phalanx-scale-"))
    ray_task = asyncio.create_task(RayServe.start(rayserve_python, settings, tmp / "ray.log"))
    server: subprocess.Popen[bytes] | None = None
    ray: RayServe | None = None
    phalanx: Phalanx | None = None
    try:
        started, url = await asyncio.to_thread(_start_phalanx, tmp, tmp / "phalanx.log")
        server = started
        token = (tmp / "data" / "admin.token").read_text().strip()
        api = httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        phalanx = Phalanx(url, token, settings, api, started.pid)
        await phalanx.register_model()
        await phalanx.deploy("cold", cold=True)
        ray = await ray_task
        await ray.deploy("cold", cold=True)
        report = await measure([phalanx, ray], settings)
    finally:
        if ray is None:
            ray_task.cancel()
            try:
                ray = await ray_task
            except (asyncio.CancelledError, Exception):
                ray = None
        if ray is not None:
            await ray.stop()
        if phalanx is not None:
            views = await phalanx.api.get("/api/v1/inferences")
            for view in views.json() if views.status_code == 200 else []:
                with contextlib.suppress(RuntimeError):
                    await phalanx.remove(view["name"])
            await phalanx.api.aclose()
        if server is not None:
            server.terminate()
            try:
                await asyncio.to_thread(server.wait, 60)
            except subprocess.TimeoutExpired:
                server.kill()
        leftovers = _kill_leftovers(tmp)
        if keep:
            print(f"logs and data kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "cpus": os.cpu_count(),
        "settings": _described(settings),
        **report,
        "leftover_processes_killed": len(leftovers),
    }


def _described(settings: Settings) -> dict[str, Any]:
    from phalanx.control.controllers.autoscale import STABLE_WINDOW

    return {
        "rounds": settings.rounds,
        "service_time_s": settings.service_time,
        "in_flight_1x": settings.base,
        "in_flight_burst": settings.base * settings.factor,
        "wanted_replicas": settings.wanted,
        "steady_s": settings.steady,
        "replica": {"cpu": REPLICA_CPU, "memory": REPLICA_MEMORY},
        "cluster_cpus": CLUSTER_CPUS,
        "phalanx_predictor": {
            "cold": settings.phalanx_predictor(cold=True),
            "burst": settings.phalanx_predictor(cold=False),
            "fixed": {
                "utilization": settings.utilization,
                "stable_window_s": STABLE_WINDOW,
                "panic_window_s": settings.look_back,
                "idle_grace_s": settings.idle_grace,
                "serving_pass_s": 1.0,
            },
        },
        "rayserve_deployment": {
            "max_ongoing_requests": settings.concurrency,
            "cold": settings.ray_autoscaling(cold=True),
            "burst": settings.ray_autoscaling(cold=False),
        },
        "all": asdict(settings),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("role", nargs="?", default="bench")
    parser.add_argument("args", nargs="*", default=[])
    defaults = Settings()
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--service-time", type=float, default=defaults.service_time)
    parser.add_argument("--steady", type=float, default=defaults.steady)
    parser.add_argument("--keep", action="store_true", help="keep the logs and data dir")
    parser.add_argument(
        "--rayserve-python",
        default=str(Path(SCRIPT).parents[1] / ".venv-rayserve" / "bin" / "python"),
    )
    args = parser.parse_args()
    if args.role == "replica":
        run_replica()
    elif args.role == "rayserve":
        run_rayserve(int(args.args[0]), int(args.args[1]))
    else:
        from phalanx.control.controllers.autoscale import PANIC_WINDOW, UTILIZATION
        from phalanx.control.controllers.serving import IDLE_GRACE

        settings = Settings(
            rounds=args.rounds,
            service_time=args.service_time,
            steady=args.steady,
            utilization=UTILIZATION,
            look_back=PANIC_WINDOW,
            idle_grace=IDLE_GRACE,
        )
        print(json.dumps(asyncio.run(bench(settings, args.rayserve_python, args.keep)), indent=2))


if __name__ == "__main__":
    main()
