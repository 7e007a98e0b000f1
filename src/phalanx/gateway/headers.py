"""Which headers pass through the gateway, each way.

Guarantees: a replica never gets the caller's credentials (``Authorization``,
``Proxy-Authorization``, ``Cookie``), a hop-by-hop header (RFC 9110 7.6.1) or one the
caller's ``Connection`` header names, nor the caller's own forwarding headers: it gets
``X-Forwarded-For``, ``-Host`` and ``-Proto`` as the server the gateway runs in saw the
request. A caller never gets a replica's hop-by-hop headers, those its ``Connection``
names, nor its ``Date`` and ``Server`` (the gateway's server writes its own).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from starlette.types import Scope

#: Headers that describe one connection, not the message (RFC 9110 7.6.1); a message's
#: ``Connection`` header may name more.
_HOP_BY_HOP: Final = frozenset(
    {b"connection", b"proxy-connection", b"keep-alive", b"te", b"trailer"}
    | {b"transfer-encoding", b"upgrade"}
)
#: Not passed to a replica, besides hop-by-hop ones: the caller's credentials; what the
#: client to the replica sets itself (host, length); ``Expect``, as the body is already
#: here; the forwarding headers the gateway writes itself.
_NOT_SENT: Final = (
    _HOP_BY_HOP
    | {b"authorization", b"proxy-authorization", b"cookie", b"host", b"content-length"}
    | {b"expect", b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto"}
)
#: Not passed back, besides hop-by-hop ones: ``Date`` and ``Server``, which the server
#: the gateway runs in writes itself (uvicorn always does), so that an answer has one
#: of each.
_NOT_ANSWERED: Final = _HOP_BY_HOP | {b"date", b"server", b"proxy-authenticate"}


def outbound(scope: Scope) -> list[tuple[str, str]]:
    """The headers a replica gets: the caller's, less those it must not (``_NOT_SENT``
    and those the caller's ``Connection`` names), plus the forwarding headers."""
    raw: list[tuple[bytes, bytes]] = scope["headers"]
    dropped = _NOT_SENT | _named_by_connection(raw)
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k not in dropped]
    client = scope.get("client")
    if client:
        headers.append(("X-Forwarded-For", client[0]))
    host = next((v for k, v in raw if k == b"host"), None)
    if host is not None:
        headers.append(("X-Forwarded-Host", host.decode("latin-1")))
    headers.append(("X-Forwarded-Proto", scope.get("scheme", "http")))
    return headers


def _named_by_connection(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The header names a message's ``Connection`` header lists (lower case)."""
    named = [
        token.strip().lower()
        for k, v in headers
        if k.lower() == b"connection"
        for token in v.split(b",")
    ]
    return frozenset(n for n in named if n)


def inbound(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers of a replica's answer that the caller gets."""
    headers = list(raw)
    dropped = _HOP_BY_HOP | _NOT_ANSWERED | _named_by_connection(headers)
    return [(k, v) for k, v in headers if k.lower() not in dropped]
