"""The gateway: an ASGI app that sends ``/serve/NAME/REST`` to a Ready replica of
service NAME as ``/REST``.

Guarantees:
- a request is sent on only for a caller ``authorize`` admits: without a token the
  answer is 401 (``WWW-Authenticate: Bearer``), for a caller the service does not
  admit (or no such service) 404, the same answer, so a service's existence is not
  shown to those it does not admit;
- the caller's ``Authorization`` and ``Cookie`` headers never reach the replica
  (replicas run tenants' code), nor do hop-by-hop headers (RFC 9110 7.6.1); the
  replica gets ``X-Forwarded-For``, ``-Host`` and ``-Proto``; the method, query string
  and body pass intact, and the answer is streamed back as it comes;
- a replica is chosen by ``Routes.acquire``; a request whose connection to it failed
  before anything was sent goes to another replica of the service (each tried once);
- with no free Ready replica, the request is held until one is free, up to ``hold``
  seconds, when Ready replicas are all at their concurrency or replicas are on their
  way (``Service.waking``: then ``on_demand(NAME)`` is called, to start one); otherwise,
  or after that, the answer is 503 with ``Retry-After``;
- errors are JSON ``{"detail", "field", "fix"}`` as the API's are; requests, errors
  and latency are counted per service, predictor and replica in ``registry``.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import Message, Receive, Scope, Send

from phalanx.gateway.routes import Replica, Routes


class Access(enum.Enum):
    """What ``authorize`` says of a caller and a service."""

    ALLOWED = "allowed"
    UNAUTHENTICATED = "unauthenticated"  # no token, or one that is not valid
    NOT_FOUND = "not-found"  # no such service, or not one the caller may call


Authorize = Callable[[str | None, str], Awaitable[Access]]

#: Headers that describe one connection, not the request (RFC 9110 7.6.1), and those
#: that carry the caller's credentials; none is passed on.
_DROPPED: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"authorization",
        b"cookie",
        b"content-length",
    }
)
_DROPPED_ANSWER: Final = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"trailer", b"upgrade"}
)
#: Seconds a client is told to wait before it tries a service with no replica again.
RETRY_AFTER: Final = 5
#: Latency buckets of ``phalanx_serving_request_seconds``.
_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


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
    ) -> None:
        self.routes = routes
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
            buckets=_BUCKETS,
            registry=registry,
        )

    def _http(self) -> aiohttp.ClientSession:
        """The pooled session (made on the event loop that first needs it): connections
        kept alive without a limit, nothing decoded, no header of its own added."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True),
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
        deadline = started + self._hold
        held = False
        try:
            while True:
                since = self.routes.version
                replica = self.routes.acquire(name, tried)
                if replica is None:
                    service = self.routes.service(name)
                    busy = service is not None and any(p.replicas for p in service.predictors)
                    waking = service is not None and service.waking
                    remaining = deadline - time.perf_counter()
                    if not (busy or waking) or remaining <= 0:
                        await _unavailable(send, name, held=busy or waking)
                        self._requests.labels(name, "", "", "503").inc()
                        return
                    if not held:
                        held = True
                        self.routes.holding(name, +1)
                    if waking:
                        self._on_demand(name)
                    await self.routes.wait(since, min(remaining, 1.0))
                    continue
                if held:
                    held = False
                    self.routes.holding(name, -1)
                try:
                    code = await self._forward(scope, body, replica, rest, send)
                except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError):
                    tried.append(replica.name)
                    continue
                finally:
                    self.routes.release(replica)
                self._requests.labels(name, replica.predictor, replica.name, str(code)).inc()
                self._seconds.labels(name, replica.predictor).observe(time.perf_counter() - started)
                return
        finally:
            if held:
                self.routes.holding(name, -1)

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
        Raises ``aiohttp.ClientConnectorError`` (or a connect timeout) when nothing was
        sent."""
        query: bytes = scope.get("query_string", b"")
        url = f"{replica.url}/{rest}" + (f"?{query.decode('latin-1')}" if query else "")
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k not in _DROPPED
        ]
        client = scope.get("client")
        headers += [
            ("X-Forwarded-For", client[0] if client else ""),
            ("X-Forwarded-Proto", scope.get("scheme", "http")),
        ]
        host = next((v for k, v in scope["headers"] if k == b"host"), None)
        if host is not None:
            headers.append(("X-Forwarded-Host", host.decode("latin-1")))
        async with self._http().request(
            scope["method"], url, headers=headers, data=body, allow_redirects=False
        ) as answer:
            out = [(k, v) for k, v in answer.raw_headers if k.lower() not in _DROPPED_ANSWER]
            await send({"type": "http.response.start", "status": answer.status, "headers": out})
            try:
                async for chunk in answer.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except aiohttp.ClientError:
                pass  # the replica broke off: the caller gets what came, then the end
            await send({"type": "http.response.body", "body": b""})
            return answer.status


_TOKEN_FIX: Final = "send 'Authorization: Bearer <token>' of a user the service admits"
_LIST_FIX: Final = "list the services you may call: phalanx get inferences"


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


async def _unavailable(send: Send, name: str, *, held: bool) -> None:
    why = (
        f"no replica of {name} became free in time"
        if held
        else f"no replica of {name} is Ready, and none is starting"
    )
    fix = f"try again in {RETRY_AFTER} s; phalanx describe inference {name} shows its replicas"
    await _error(send, 503, why, fix, retry_after=RETRY_AFTER)


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
