"""What every view of the console shares: the API's address, the secret its forms are
signed with, the templates, and a client made for one visitor.

Guarantees: every datum a page shows comes from the API through ``phalanx.client.Client``
called with the visitor's own token, so a visitor sees exactly what the API lets them
see. The clients of all visitors share one connection pool to the API (the API runs in
the same server, reached over its loopback address).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx
from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape

from phalanx.client import Client
from phalanx.web import formatting

HERE: Final = Path(__file__).parent
#: Seconds the API has to answer a page's request.
API_TIMEOUT: Final = 10.0


class _SharedTransport(httpx.BaseTransport):
    """One pool of connections to the API for every visitor's client: closing a client
    leaves the pool open for the next request."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Kept open: the pool outlives each client (``shutdown`` closes it)."""

    def shutdown(self) -> None:
        """Close the pool's connections."""
        self._inner.close()


def _templates() -> Jinja2Templates:
    environment = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(formatting.FILTERS)
    return Jinja2Templates(env=environment)


@dataclass(slots=True, kw_only=True)
class Console:
    """The console's parts: ``api_url()`` is the API's base URL (read at each request: the
    server knows its port only once it listens); ``secret`` signs the forms' CSRF tokens
    (a new one at each start: a form from before a restart is refused and reloaded)."""

    api_url: Callable[[], str]
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    templates: Jinja2Templates = field(default_factory=_templates)
    transport: _SharedTransport = field(default_factory=_SharedTransport)

    def client(self, token: str) -> Client:
        """A client of the API acting as the holder of ``token``."""
        return Client(self.api_url(), token, transport=self.transport, timeout=API_TIMEOUT)


def console_of(request: Request) -> Console:
    """The console serving ``request``."""
    found: Console = request.app.state.console
    return found
