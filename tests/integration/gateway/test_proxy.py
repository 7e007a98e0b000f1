"""The gateway's proxy over real HTTP on loopback: what passes to a replica and what
never does, a replica that refuses connections skipped for another, a request held
while replicas start and answered once one is Ready, 503 with Retry-After otherwise;
401 and 404 before anything reaches a replica; per-replica metrics."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send

from phalanx.gateway.proxy import Access, Gateway
from phalanx.gateway.routes import Predictor, Replica, Routes, Service


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """A replica: answers with what it was sent, as JSON, in three chunks."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    said = json.dumps(
        {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope["query_string"].decode(),
            "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
            "body": body.decode(),
        }
    ).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-replica", b"1")]})
    third = len(said) // 3
    for chunk in (said[:third], said[third : 2 * third], said[2 * third :]):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on a loopback port of the OS's choice; its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="auto")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def dead_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


async def authorize(token: str | None, service: str) -> Access:
    if token is None:
        return Access.UNAUTHENTICATED
    return Access.ALLOWED if token == "good" else Access.NOT_FOUND


def table(*replicas: Replica, waking: bool = False) -> dict[str, Service]:
    return {"svc": Service("svc", (Predictor("main", 100, replicas),), waking=waking)}


GOOD = {"Authorization": "Bearer good"}


def test_what_reaches_a_replica_and_what_never_does() -> None:
    routes, registry = Routes(), CollectorRegistry()
    gateway = Gateway(routes, authorize=authorize, on_demand=lambda _: None, registry=registry)
    with serving(echo) as replica, serving(gateway) as url, httpx.Client(base_url=url) as client:
        routes.replace(
            table(Replica("a-dead", dead_url(), "main"), Replica("b-live", replica, "main"))
        )
        answer = client.post(
            "/svc/v1/predict?x=1&y=2",
            content=b'{"in": [1]}',
            headers={
                **GOOD,
                "Cookie": "session=secret",
                "Connection": "keep-alive",
                "X-Mine": "kept",
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-replica"] == "1"
        said = answer.json()
        assert (said["method"], said["path"], said["query"]) == ("POST", "/v1/predict", "x=1&y=2")
        assert said["body"] == '{"in": [1]}'
        headers = said["headers"]
        assert "authorization" not in headers and "cookie" not in headers
        assert headers["x-mine"] == "kept" and headers["x-forwarded-for"] == "127.0.0.1"
        assert headers["x-forwarded-host"].startswith("127.0.0.1:")
        # the dead replica was tried first (fewest in flight, then by name) and skipped
        served = registry.get_sample_value(
            "phalanx_serving_requests_total",
            {"service": "svc", "predictor": "main", "replica": "b-live", "code": "200"},
        )
        assert served == 1.0

        assert client.get("/svc/").status_code == 401
        assert client.get("/svc/").headers["www-authenticate"] == "Bearer"
        other = client.get("/svc/", headers={"Authorization": "Bearer other"})
        nothing = client.get("/nothing/", headers=GOOD)
        assert other.status_code == nothing.status_code == 404
        assert other.json()["fix"] and "svc" in other.json()["detail"]
        assert routes.in_flight("svc") == {"a-dead": 0, "b-live": 0}


def test_no_ready_replica_answers_503_unless_one_is_on_its_way() -> None:
    routes = Routes()
    asked: list[str] = []
    gateway = Gateway(routes, authorize=authorize, on_demand=asked.append, hold=60)
    with (
        serving(echo) as replica,
        serving(gateway) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        routes.replace(table())
        refused = client.get("/svc/", headers=GOOD)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "none is starting" in refused.json()["detail"] and not asked

        routes.replace(table(waking=True))
        ready = table(Replica("r", replica, "main"))
        threading.Timer(0.3, routes.replace, [ready]).start()
        held = client.get("/svc/hello", headers=GOOD)
        assert held.status_code == 200 and held.json()["path"] == "/hello"
        assert asked and set(asked) == {"svc"}


def test_a_held_request_gives_up_after_the_hold() -> None:
    routes = Routes()
    gateway = Gateway(routes, authorize=authorize, on_demand=lambda _: None, hold=0.3)
    with serving(gateway) as url, httpx.Client(base_url=url, timeout=60) as client:
        routes.replace(table(waking=True))
        answer = client.get("/svc/", headers=GOOD)
        assert answer.status_code == 503 and "became free in time" in answer.json()["detail"]


def test_many_requests_at_once_all_arrive_and_leave_no_slot_taken() -> None:
    routes = Routes()
    gateway = Gateway(routes, authorize=authorize, on_demand=lambda _: None)
    with serving(echo) as one, serving(echo) as two, serving(gateway) as url:
        routes.replace(
            {
                "svc": Service(
                    "svc",
                    (
                        Predictor(
                            "main",
                            100,
                            (Replica("one", one, "main"), Replica("two", two, "main")),
                            concurrency=4,
                        ),
                    ),
                )
            }
        )

        async def burst() -> list[int]:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                answers = await asyncio.gather(
                    *(client.get(f"/svc/{i}", headers=GOOD) for i in range(64))
                )
            return [a.status_code for a in answers]

        assert asyncio.run(burst()) == [200] * 64
        assert routes.in_flight("svc") == {"one": 0, "two": 0}
