"""Who may call which inference service through the gateway: ``ServiceAccess``.

A token is checked as the API checks it (``TokenCache``: remembered, else read from the
store off the event loop). Its holder may call a service they own, one whose
``callers`` name them, or any service as an admin; for anyone else, and for a service
that does not exist, the answer is the same (``Access.NOT_FOUND``). Each admitted call
counts as the service's activity (``Serving.saw_request``; a gateway in its own
process reports it instead), which keeps a replica of a
predictor that scales to zero alive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from starlette.concurrency import run_in_threadpool

from phalanx.control.auth import Expired, TokenCache
from phalanx.gateway.proxy import Access


class Callers(Protocol):
    """Who may call each service besides admins (its owner and its ``callers``), and
    where an admitted call is counted as the service's activity."""

    @property
    def access(self) -> Mapping[str, frozenset[str]]: ...

    def saw_request(self, service: str) -> None: ...


class ServiceAccess:
    """The gateway's ``authorize`` over ``tokens`` and the table of ``serving``'s callers
    (the serving controller's, or, in a gateway process, the store's)."""

    def __init__(self, tokens: TokenCache, serving: Callers) -> None:
        self._tokens = tokens
        self._serving = serving

    async def __call__(self, token: str | None, service: str) -> Access:
        if token is None:
            return Access.UNAUTHENTICATED
        found = self._tokens.remembered(token) or await run_in_threadpool(self._tokens.check, token)
        if found is None or isinstance(found, Expired):
            return Access.UNAUTHENTICATED
        callers = self._serving.access.get(service)
        if callers is None or not (found.is_admin or found.name in callers):
            return Access.NOT_FOUND
        self._serving.saw_request(service)
        return Access.ALLOWED
