"""The console's pages are not to be framed, sniffed or scripted from elsewhere.

Every response of the console carries, unless its handler set its own:

- ``Content-Security-Policy``: scripts, styles, images, frames and form targets from
  the console's own origin only (inline ``style`` attributes allowed: the bars are drawn
  with them; inline scripts are not), nothing may frame a page (``frame-ancestors
  'none'``: no clickjacking of the cancel and submit buttons), no ``<base>``;
- ``X-Frame-Options: DENY`` for browsers that predate ``frame-ancestors``;
- ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``.

A handler that serves foreign content (a simulator report, framed by the console's own
page) sets its own policy, stricter but for framing: then neither it nor its framing
is touched (no ``X-Frame-Options`` is added beside it).
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

POLICY: Final = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS: Final = (
    ("Content-Security-Policy", POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)


class SecurityHeaders:
    """ASGI middleware: adds ``HEADERS`` to each HTTP response that lacks them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                own = "content-security-policy" in headers
                for name, value in HEADERS:
                    if not (own and name == "X-Frame-Options"):
                        headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
