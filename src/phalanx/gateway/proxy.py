"""The gateway: an ASGI app that sends ``/serve/NAME/REST`` to a Ready replica of
service NAME as ``/REST``.

Guarantees:
- a request is sent on only for a caller ``authorize`` admits: without a token the
  answer is 401 (``WWW-Authenticate: Bearer``), for a caller the service does not
  admit (or no such service) 404, the same answer, so a service's existence is not
  shown to those it does not admit;
- the caller's ``Authorization``, ``Proxy-Authorization`` and ``Cookie`` headers never
  reach the replica (replicas run tenants' code), nor do hop-by-hop headers, those the
  ``Connection`` header names included (RFC 9110 7.6.1), in either direction; the
  replica gets ``X-Forwarded-For``, ``-Host`` and ``-Proto`` as the server the gateway
  runs in saw the request (that server decides which proxies in front of it to trust:
  a caller's own forwarding headers are not passed on); the method, query string and
  body pass intact, and the answer is streamed back as it comes;
- a replica is chosen by ``Routes.acquire``; a request whose connection to it failed
  before anything was sent goes to another replica of the service (each tried once;
  nothing is marked down for later requests); when every Ready replica refused, the
  answer is 502 at once; a replica that fails after the request may have reached it
  (closed, reset) is not retried: the answer is 502, or the end of what came;
- with no free Ready replica, the request is held until one is free, up to ``hold``
  seconds, when Ready replicas are all at their concurrency or replicas are on their
  way (``Service.waking``: then ``on_demand(NAME)`` is called, to start one); otherwise,
  or after that, the answer is 503 with ``Retry-After``;
- errors are JSON ``{"detail", "field", "fix"}`` as the API's are; in ``registry``:
  ``phalanx_serving_requests_total`` by service, predictor, replica and status (the
  gateway's own 502/503 included), ``phalanx_serving_request_seconds`` by service and
  predictor, ``phalanx_serving_connect_failures_total`` by replica, and, read from
  ``routes`` at each scrape, ``phalanx_serving_in_flight`` by replica and
  ``phalanx_serving_held`` by service; the same answers by predictor in ``tallies``
  (what rollouts judge a new version by);
- nothing is logged per request.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import Message, Receive, Scope, Send

from phalanx.gateway.headers import inbound, outbound
from phalanx.gateway.routes import Replica, Routes
from phalanx.gateway.tallies import LATENCY_BUCKETS, Tallies


class Access(enum.Enum):
    """What ``authorize`` says of a caller and a service."""

    ALLOWED = "allowed"
    UNAUTHENTICATED = "unauthenticated"  # no token, or one that is not valid
    NOT_FOUND = "not-found"  # no such service, or not one the caller may call


Authorize = Callable[[str | None, str], Awaitable[Access]]

#: The connection to the replica failed before the request was sent.
_CONNECT_FAILED: Final = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
#: Seconds an idle pooled connection is kept: less than the 5 s after which uvicorn (what
#: replicas most often run) closes one, so that a request seldom meets a connection the
#: replica is closing (aiohttp sends a GET again on a new one; a POST would be a 502).
_KEEPALIVE: Final = 4.0
#: Seconds a client is told to wait before it tries a service with no replica again.
RETRY_AFTER: Final = 5


class Gateway:
    """The ASGI app (see the module docstring)."""

    def __init__(
        self,
        routes: Routes,
        *,
        authorize: Authorize,
        on_demand: Callable[[str], None],
        hold: float = 30.0,
        registry: CollectorRegistry | None = None,
        tallies: Tallies | None = None,
    ) -> None:
        self.routes = routes
        self.tallies = tallies or Tallies()
        self._authorize = authorize
        self._on_demand = on_demand
        self._hold = hold
        self._session: aiohttp.ClientSession | None = None
        registry = registry or CollectorRegistry()
        self._requests = Counter(
            "phalanx_serving_requests",
            "Requests the gateway answered, by service, predictor, replica and status",
            ["service", "predictor", "replica", "code"],
            registry=registry,
        )
        self._seconds = Histogram(
            "phalanx_serving_request_seconds",
            "Time from a request's arrival at the gateway to its answer's last byte",
            ["service", "predictor"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._refused = Counter(
            "phalanx_serving_connect_failures",
            "Connections to a replica that failed before the request was sent",
            ["service", "predictor", "replica"],
            registry=registry,
        )
        registry.register(_Load(routes))

    def _http(self) -> aiohttp.ClientSession:
        """The pooled session (made on the event loop that first needs it): connections
        kept alive without a limit, nothing decoded, no header of its own added."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=0, keepalive_timeout=_KEEPALIVE, enable_cleanup_closed=True
                ),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                trust_env=False,
            )
        return self._session

    async def aclose(self) -> None:
        """Close the pooled connections (on the event loop that made them: the host
        app's shutdown, or this app's own lifespan)."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # run on its own: close the pool at shutdown
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        name, _, rest = path.lstrip("/").partition("/")
        access = await self._authorize(_token(scope), name) if name else Access.NOT_FOUND
        if access is Access.UNAUTHENTICATED:
            await _error(send, 401, "no valid bearer token", _TOKEN_FIX, bearer=True)
            return
        if access is not Access.ALLOWED or self.routes.service(name) is None:
            await _error(send, 404, f"no inference named {name!r}", _LIST_FIX)
            return
        body = await _body(receive)
        await self._route(scope, send, name, rest, body, started)

    async def _route(
        self, scope: Scope, send: Send, name: str, rest: str, body: bytes, started: float
    ) -> None:
        """Send the request to a replica of ``name``, holding it while none is free and
        one may be (see the module docstring); a held request counts in the service's
        demand (``Routes.holding``) until it leaves."""
        tried: list[str] = []
        held = False
        try:
            while True:
                since = self.routes.version
                replica = self.routes.acquire(name, tried)
                if replica is None:
                    verdict = self._verdict(name, tried, started)
                    if verdict is not _Verdict.HOLD:
                        status = await _unavailable(send, name, verdict)
                        self._requests.labels(name, "", "", str(status)).inc()
                        return
                    if not held:
                        held = True
                        self.routes.holding(name, +1)
                    service = self.routes.service(name)
                    if service is not None and service.waking:
                        self._on_demand(name)
                    remaining = started + self._hold - time.perf_counter()
                    await self.routes.wait(since, min(remaining, 1.0))
                    continue
                if held:
                    held = False
                    self.routes.holding(name, -1)
                if await self._attempt(scope, send, name, rest, body, replica, started):
                    return
                tried.append(replica.name)
        finally:
            if held:
                self.routes.holding(name, -1)

    def _verdict(self, name: str, tried: list[str], started: float) -> _Verdict:
        """What to do with a request of ``name`` that found no free replica not among
        ``tried`` (those that refused it)."""
        service = self.routes.service(name)
        if service is None:  # deleted meanwhile
            return _Verdict.NONE_READY
        untried = any(
            r.name not in tried for p in service.predictors if p.weight > 0 for r in p.replicas
        )
        if not (untried or service.waking):
            return _Verdict.ALL_REFUSED if tried else _Verdict.NONE_READY
        if time.perf_counter() >= started + self._hold:
            return _Verdict.HELD_TOO_LONG
        return _Verdict.HOLD

    async def _attempt(
        self,
        scope: Scope,
        send: Send,
        name: str,
        rest: str,
        body: bytes,
        replica: Replica,
        started: float,
    ) -> bool:
        """Send the request to ``replica`` (acquired: released here) and answer the
        caller; False when the connection failed before the request was sent (nothing
        was answered: try another)."""
        try:
            code = await self._forward(scope, body, replica, rest, send)
        except _CONNECT_FAILED:
            self._refused.labels(name, replica.predictor, replica.name).inc()
            return False
        except (TimeoutError, aiohttp.ClientError) as failure:
            code = 502  # the request may have reached the replica: not sent again
            why = f"replica {replica.name} failed before answering ({type(failure).__name__})"
            await _error(send, code, why, _FAILED_FIX)
        finally:
            self.routes.release(replica)
        seconds = time.perf_counter() - started
        self._requests.labels(name, replica.predictor, replica.name, str(code)).inc()
        self._seconds.labels(name, replica.predictor).observe(seconds)
        self.tallies.record(name, replica.predictor, code, seconds)
        return True

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(
        self, scope: Scope, body: bytes, replica: Replica, rest: str, send: Send
    ) -> int:
        """Send the request to ``replica`` and stream its answer back; the status.
        Raises ``aiohttp.ClientError`` (``_CONNECT_FAILED`` when nothing was sent) only
        before the answer began."""
        query: bytes = scope.get("query_string", b"")
        url = f"{replica.url}/{rest}" + (f"?{query.decode('latin-1')}" if query else "")
        async with self._http().request(
            scope["method"],
            url,
            headers=outbound(scope),
            data=body,
            allow_redirects=False,
        ) as answer:
            out = inbound(answer.raw_headers)
            await send({"type": "http.response.start", "status": answer.status, "headers": out})
            await _stream(answer.content, send)
            return answer.status


class _Verdict(enum.Enum):
    """What becomes of a request that found no free replica."""

    HOLD = "hold"  # wait for a change of the routes, then look again
    NONE_READY = "none-ready"  # 503: none Ready and none on its way
    HELD_TOO_LONG = "held-too-long"  # 503: held ``hold`` seconds, none became free
    ALL_REFUSED = "all-refused"  # 502: every Ready replica refused the connection


class _Load(Collector):
    """The routes' requests in flight and held, read at each scrape (nothing to keep
    in step on the request path)."""

    def __init__(self, routes: Routes) -> None:
        self._routes = routes

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        in_flight, held = self._families()
        for service, predictor, replica, count in self._routes.in_flight_rows():
            in_flight.add_metric([service, predictor, replica], count)
        for service, count in sorted(self._routes.held().items()):
            held.add_metric([service], count)
        return iter((in_flight, held))

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "phalanx_serving_in_flight",
                "Requests the gateway has sent to a Ready replica and not yet answered",
                labels=["service", "predictor", "replica"],
            ),
            GaugeMetricFamily(
                "phalanx_serving_held",
                "Requests waiting at the gateway for a free replica of a service",
                labels=["service"],
            ),
        )


async def _stream(content: aiohttp.StreamReader, send: Send) -> None:
    """Pass a replica's answer body on as it comes; the chunk that ends it says so (no
    empty message after it: a small answer is one ``send``). A replica that breaks off:
    the caller gets what came, then the end."""
    try:
        while True:
            chunk = await content.readany()
            done = not chunk or content.at_eof()
            await send({"type": "http.response.body", "body": chunk, "more_body": not done})
            if done:
                return
    except (TimeoutError, aiohttp.ClientError):
        await send({"type": "http.response.body", "body": b""})


_TOKEN_FIX: Final = "send 'Authorization: Bearer <token>' of a user the service admits"
_LIST_FIX: Final = "list the services you may call: phalanx get inferences"
_FAILED_FIX: Final = "see the replica's logs: phalanx logs <replica job>; try again"


def _token(scope: Scope) -> str | None:
    """The bearer token of the request, or None."""
    for key, value in scope["headers"]:
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None


async def _body(receive: Receive) -> bytes:
    """The whole request body (the server's body limit has already bounded it)."""
    chunks: list[bytes] = []
    while True:
        message: Message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _unavailable(send: Send, name: str, verdict: _Verdict) -> int:
    """Answer a request that found no free replica of ``name``; the status."""
    if verdict is _Verdict.ALL_REFUSED:
        status, why = 502, f"every Ready replica of {name} refused the connection"
    elif verdict is _Verdict.HELD_TOO_LONG:
        status, why = 503, f"no replica of {name} became free in time"
    else:
        status, why = 503, f"no replica of {name} is Ready, and none is starting"
    fix = f"try again in {RETRY_AFTER} s; phalanx describe inference {name} shows its replicas"
    await _error(send, status, why, fix, retry_after=RETRY_AFTER)
    return status


async def _error(
    send: Send,
    status: int,
    detail: str,
    fix: str,
    *,
    bearer: bool = False,
    retry_after: int | None = None,
) -> None:
    body = json.dumps({"detail": detail, "field": None, "fix": fix}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
