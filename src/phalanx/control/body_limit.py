"""A cap on request bodies: ``MAX_INPUT_SIZE`` bytes, the largest document the CLI sends.

Guarantees: a request whose ``Content-Length`` is over the limit is answered 413 before
any of its body is read; a body without a length (``Transfer-Encoding: chunked``) is
counted as it streams in and answered 413 as soon as it passes the limit, so no more of
it than the limit (and one network read) is ever held. The answer has the API's error
shape: ``{"detail", "field": "body", "fix"}``, naming the limit in bytes. The
connection is closed after it (the rest of the body is not read).
"""

from __future__ import annotations

import json
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phalanx.control.errors import ApiError
from phalanx.spec.limits import MAX_INPUT_SIZE, size

#: Largest request body the API reads, in bytes.
MAX_BODY: Final = MAX_INPUT_SIZE


class BodyTooLarge(ApiError):
    """A request body over the limit (413)."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        sent = f"a body of {declared} bytes" if declared is not None else "the body"
        super().__init__(
            413,
            f"{sent} is over the API's limit of {limit} bytes ({size(limit)})",
            field="body",
            fix=f"send at most {size(limit)}: split the documents (one job per request), "
            "and keep large data in files the job reads rather than in the document",
        )
        self.headers = {"Connection": "close"}


class BodyLimit:
    """ASGI middleware refusing request bodies over ``limit`` bytes (see the module)."""

    def __init__(self, app: ASGIApp, *, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _answer(send, BodyTooLarge(self.limit, declared))
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as error:
            # The routes answer it themselves (it is an ApiError); this is for a reader
            # outside them.
            if started:
                raise
            await _answer(send, error)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server refuses it before we are called
    return None


async def _answer(send: Send, error: BodyTooLarge) -> None:
    body = json.dumps(error.detail).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
