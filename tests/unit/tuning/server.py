"""A real HTTP server on 127.0.0.1 for the load generator's tests, run on an event loop
of its own in a thread (so that a handler that blocks it stalls the whole server, as a
stuck replica would).

Paths: ``/ok`` answers 200; ``/fail`` 500; ``/slow`` after 2 s; ``/stall/TOKEN`` blocks
the server for 1 s on the tenth request with that token, else answers 200."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

STALL_AT = 10
STALL_SECONDS = 1.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _app() -> web.Application:
    seen: Counter[str] = Counter()

    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b'{"ok":true}', content_type="application/json")

    async def fail(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=500, body=b"no")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2.0)
        return web.Response(body=b"late")

    async def stall(request: web.Request) -> web.Response:
        token = request.match_info["token"]
        seen[token] += 1
        if seen[token] == STALL_AT:
            time.sleep(STALL_SECONDS)  # blocks the server's loop: every request waits
        return web.Response(body=b"ok")

    app = web.Application()
    app.router.add_post("/ok", ok)
    app.router.add_get("/ok", ok)
    app.router.add_post("/fail", fail)
    app.router.add_post("/slow", slow)
    app.router.add_post("/stall/{token}", stall)
    return app


@contextmanager
def serving() -> Iterator[str]:
    """The server's base URL while the block runs."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app(), access_log=None, shutdown_timeout=0.5)
    port = free_port()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="tuning-test-server", daemon=True)
    thread.start()
    assert ready.wait(10), "the test server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
