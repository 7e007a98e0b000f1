"""The one error the client raises for anything that went wrong talking to a server.

``ClientError`` carries the HTTP status (None when no answer came: refused
connection, timeout, bad URL, unusable config) and the API's ``detail``, ``field`` and
``fix``. Its text is one line a person can act on.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from phalanx.domain.errors import RemoteError


class ClientError(RemoteError):
    """The server refused a request, could not be reached, or answered nonsense."""

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.detail = detail
        self.status = status
        self.field = field
        self.fix = fix
        super().__init__(self.message())

    def message(self) -> str:
        """``detail``, then the field and the fix when the detail does not already say them
        (a detail names a field as ``field: ...``)."""
        parts = [self.detail]
        if self.field and f"{self.field}:" not in self.detail:
            parts.append(f"field: {self.field}")
        if self.fix and self.fix not in self.detail:
            parts.append(f"fix: {self.fix}")
        return "; ".join(parts)


def from_response(response: httpx.Response, *, has_token: bool) -> ClientError:
    """The error an answer with status >= 400 stands for."""
    status = response.status_code
    body = _json(response)
    detail: Any = body.get("detail") if isinstance(body, dict) else None
    field = body.get("field") if isinstance(body, dict) else None
    fix = body.get("fix") if isinstance(body, dict) else None
    if not isinstance(detail, str):
        text = response.text.strip().splitlines()
        detail = text[0][:200] if text else response.reason_phrase or "no detail"
    if status == 401 and not has_token:
        fix = (
            "set PHALANX_TOKEN (or --token, or 'token:' in the config file); the admin "
            "token of a fresh server is in its data dir's admin.token"
        )
    elif status == 404 and detail == "Not Found":
        detail = f"{response.request.method} {response.request.url.path}: not found"
        fix = "check that the server URL points at a phalanx server of this version"
    elif status >= 500:
        fix = fix or "this is a server bug or outage: see the server's log"
    return ClientError(
        f"{detail} (HTTP {status})" if status >= 500 else detail,
        status=status,
        field=field if isinstance(field, str) else None,
        fix=fix if isinstance(fix, str) else None,
    )


def from_transport(error: Exception, server: str, server_from: str) -> ClientError:
    """The error a failed connection stands for, naming the server and where its URL came from."""
    origin = f" (from {server_from})" if server_from else ""
    if isinstance(error, httpx.ConnectError):
        return ClientError(
            f"cannot connect to the phalanx server at {server}{origin}: {_reason(error)}",
            field="server",
            fix="start one with 'phalanx up', or point PHALANX_SERVER (or --server) "
            "at a running server",
        )
    if isinstance(error, httpx.TimeoutException):
        return ClientError(
            f"the phalanx server at {server}{origin} did not answer in time",
            field="server",
            fix="check that the server is up and reachable; retry",
        )
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ClientError(
            f"{server!r}{origin} is not a usable server URL",
            field="server",
            fix="give a URL like http://127.0.0.1:8080",
        )
    return ClientError(
        f"lost the connection to the phalanx server at {server}{origin}: {_reason(error)}",
        field="server",
        fix="check that the server is still up; retry",
    )


def _json(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def _reason(error: Exception) -> str:
    text = str(error).strip()
    if "refused" in text.lower():
        return "connection refused"
    return text.splitlines()[0][:200] if text else type(error).__name__
