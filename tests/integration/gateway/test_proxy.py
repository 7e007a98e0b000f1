"""The gateway's proxy over real HTTP on loopback: what passes to a replica and what
never does, a replica that refuses connections skipped for another (502 when all do), a
replica that hangs up answered 502, a request held while replicas start and answered
once one is Ready, 503 with Retry-After otherwise, a request over a replica's
concurrency held until a slot frees; 401 and 404 before anything reaches a replica;
per-replica metrics. Every wait is for a condition, with a generous deadline."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send

from phalanx.gateway.proxy import Access, Gateway
from phalanx.gateway.routes import Predictor, Replica, Routes, Service
from tests.integration.executors.harness import wait_for


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
def serving(app: Any, **config: Any) -> Iterator[str]:
    """``app`` under uvicorn (more ``config``) on a loopback port of the OS's choice; its
    base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="error", lifespan="auto", **config
        )
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


def counted(registry: CollectorRegistry, name: str, labels: dict[str, str], value: float) -> None:
    """Wait until sample ``name{labels}`` is ``value``: the gateway counts a request once
    its answer went out, so a client may read the answer first."""
    wait_for(lambda: registry.get_sample_value(name, labels) == value, f"{name}{labels} {value}")


def released(routes: Routes, slots: dict[str, int]) -> None:
    """Wait until service svc's requests in flight are ``slots``: a slot is released
    once the answer went out, so a client may read the answer first."""
    wait_for(lambda: routes.in_flight("svc") == slots, f"in flight {slots}")


def test_what_reaches_a_replica_and_what_never_does() -> None:
    routes, registry = Routes(), CollectorRegistry()
    gateway = Gateway(routes, authorize=authorize, on_demand=lambda _: None, registry=registry)
    with (
        serving(echo) as replica,
        serving(gateway, proxy_headers=False) as url,  # trusts no proxy in front of it
        httpx.Client(base_url=url) as client,
    ):
        routes.replace(
            table(Replica("a-dead", dead_url(), "main"), Replica("b-live", replica, "main"))
        )
        answer = client.post(
            "/svc/v1/predict?x=1&y=2",
            content=b'{"in": [1]}',
            headers={
                **GOOD,
                "Cookie": "session=secret",
                "Proxy-Authorization": "Basic c2VjcmV0",
                "Connection": "keep-alive, x-hop",
                "X-Hop": "named by Connection: this hop only",
                "X-Forwarded-For": "10.1.2.3",
                "X-Forwarded-Proto": "https",
                "X-Mine": "kept",
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-replica"] == "1"
        assert len(answer.headers.get_list("date")) == len(answer.headers.get_list("server")) == 1
        said = answer.json()
        assert (said["method"], said["path"], said["query"]) == ("POST", "/v1/predict", "x=1&y=2")
        assert said["body"] == '{"in": [1]}'
        headers = said["headers"]
        for never in ("authorization", "proxy-authorization", "cookie", "x-hop"):
            assert never not in headers, never
        assert headers["x-mine"] == "kept"
        # what the gateway saw, not what the caller claims
        assert (headers["x-forwarded-for"], headers["x-forwarded-proto"]) == ("127.0.0.1", "http")
        assert headers["x-forwarded-host"].startswith("127.0.0.1:")
        # the dead replica was tried first (fewest in flight, then by name) and skipped
        seconds = {"service": "svc", "predictor": "main"}
        # counted once the answer went out: the client may read it first
        counted(registry, "phalanx_serving_request_seconds_count", seconds, 1.0)
        served = registry.get_sample_value(
            "phalanx_serving_requests_total",
            {"service": "svc", "predictor": "main", "replica": "b-live", "code": "200"},
        )
        refused = registry.get_sample_value(
            "phalanx_serving_connect_failures_total",
            {"service": "svc", "predictor": "main", "replica": "a-dead"},
        )
        assert served == refused == 1.0

        assert client.get("/svc/").status_code == 401
        assert client.get("/svc/").headers["www-authenticate"] == "Bearer"
        other = client.get("/svc/", headers={"Authorization": "Bearer other"})
        nothing = client.get("/nothing/", headers=GOOD)
        assert other.status_code == nothing.status_code == 404
        assert other.json()["fix"] and "svc" in other.json()["detail"]
        released(routes, {"a-dead": 0, "b-live": 0})


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
        released(routes, {"one": 0, "two": 0})


def test_a_request_over_the_concurrency_waits_for_a_slot() -> None:
    routes, registry = Routes(), CollectorRegistry()
    gate = threading.Event()
    reached: list[str] = []

    async def gated(scope: Scope, receive: Receive, send: Send) -> None:
        """A replica that answers ``/first`` only once ``gate`` is set."""
        if scope["type"] != "http":
            return
        reached.append(scope["path"])
        if scope["path"] == "/first":
            await asyncio.to_thread(gate.wait, 30)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    gateway = Gateway(
        routes, authorize=authorize, on_demand=lambda _: None, hold=60, registry=registry
    )
    in_flight = {"service": "svc", "predictor": "main", "replica": "r"}
    with (
        serving(gated) as replica,
        serving(gateway) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        only = Predictor("main", 100, (Replica("r", replica, "main"),), concurrency=1)
        routes.replace({"svc": Service("svc", (only,))})
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.get, "/svc/first", headers=GOOD)
            wait_for(lambda: routes.in_flight("svc") == {"r": 1}, "the first request in flight")
            # counted at the gateway before it reaches the replica: wait for both
            wait_for(lambda: reached == ["/first"], "the first request at the replica")
            second = pool.submit(client.get, "/svc/second", headers=GOOD)
            wait_for(lambda: routes.held() == {"svc": 1}, "the second request held")
            assert registry.get_sample_value("phalanx_serving_in_flight", in_flight) == 1.0
            assert registry.get_sample_value("phalanx_serving_held", {"service": "svc"}) == 1.0
            assert reached == ["/first"] and not second.done()
            gate.set()
            assert first.result(30).text == "/first" and second.result(30).text == "/second"
        assert reached == ["/first", "/second"]
        released(routes, {"r": 0})
        assert routes.held() == {}
        assert registry.get_sample_value("phalanx_serving_in_flight", in_flight) == 0.0


def test_every_replica_refusing_is_a_502_at_once() -> None:
    routes, registry = Routes(), CollectorRegistry()
    gateway = Gateway(
        routes, authorize=authorize, on_demand=lambda _: None, hold=600, registry=registry
    )
    with serving(gateway) as url, httpx.Client(base_url=url, timeout=60) as client:
        routes.replace(table(Replica("a", dead_url(), "main"), Replica("b", dead_url(), "main")))
        answer = client.get("/svc/", headers=GOOD)  # held for the hold, it would time out
        assert answer.status_code == 502 and answer.headers["retry-after"] == "5"
        assert "refused" in answer.json()["detail"] and answer.json()["fix"]
        for replica in ("a", "b"):
            labels = {"service": "svc", "predictor": "main", "replica": replica}
            assert (
                registry.get_sample_value("phalanx_serving_connect_failures_total", labels) == 1.0
            )
        gateway_502 = {"service": "svc", "predictor": "", "replica": "", "code": "502"}
        counted(registry, "phalanx_serving_requests_total", gateway_502, 1.0)
        released(routes, {"a": 0, "b": 0})


@contextmanager
def hanging_up() -> Iterator[str]:
    """A loopback "replica" that reads a request, then closes the connection unanswered."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(10)
        listener.close()


def test_a_replica_that_hangs_up_is_a_502_and_not_sent_the_request_again() -> None:
    routes, registry = Routes(), CollectorRegistry()
    gateway = Gateway(routes, authorize=authorize, on_demand=lambda _: None, registry=registry)
    with (
        hanging_up() as rude,
        serving(echo) as polite,
        serving(gateway) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        # the one that hangs up sorts first: a POST it may have read is not sent elsewhere
        routes.replace(table(Replica("a-rude", rude, "main"), Replica("b-polite", polite, "main")))
        answer = client.post("/svc/predict", content=b"once", headers=GOOD)
        assert answer.status_code == 502 and "a-rude" in answer.json()["detail"]
        labels = {"service": "svc", "predictor": "main", "replica": "a-rude", "code": "502"}
        counted(registry, "phalanx_serving_requests_total", labels, 1.0)
        released(routes, {"a-rude": 0, "b-polite": 0})


def test_an_answer_is_passed_on_as_it_comes() -> None:
    routes = Routes()
    gate = threading.Event()

    async def tokens(scope: Scope, receive: Receive, send: Send) -> None:
        """A replica that sends its first token, and the rest only once ``gate`` is set."""
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first ", "more_body": True})
        await asyncio.to_thread(gate.wait, 30)
        await send({"type": "http.response.body", "body": b"rest"})

    gateway = Gateway(routes, authorize=authorize, on_demand=lambda _: None)
    with (
        serving(tokens) as replica,
        serving(gateway) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        routes.replace(table(Replica("r", replica, "main")))
        with client.stream("GET", "/svc/generate", headers=GOOD) as answer:
            chunks = answer.iter_raw()
            assert next(chunks) == b"first "  # before the replica has finished
            gate.set()
            assert b"".join(chunks) == b"rest"
