"""A bound on how many console requests are served at once.

The console's handlers are synchronous: each holds a worker thread of the server's one
thread pool (anyio's, 40 threads) while it calls the API over the loopback, and each of
those calls needs a worker thread of the same pool for the API's handler. Unbounded,
enough open pages would hold every thread waiting for API calls that cannot get one, and
the API would stall for everyone (the console's own pages included). Behind the gate at
most ``limit`` console requests run at a time, so at most ``2 x limit`` threads serve
the console (a handler, and its API call in flight) and the rest stay free for API
clients; the console's other requests wait their turn in the event loop, holding no
thread.
"""

from __future__ import annotations

from typing import Final

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

#: Console requests served at once (the thread pool has 40 workers).
CONSOLE_CONCURRENCY: Final = 8


class Gate:
    """ASGI middleware: lets at most ``limit`` HTTP requests into ``app`` at a time, the
    others waiting in arrival order."""

    def __init__(self, app: ASGIApp, *, limit: int = CONSOLE_CONCURRENCY) -> None:
        if limit < 1:
            raise ValueError("a gate lets at least one request through")
        self.app = app
        self.limit = limit
        self._slots: anyio.Semaphore | None = None  # made in the server's event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = anyio.Semaphore(self.limit)
        async with self._slots:
            await self.app(scope, receive, send)
