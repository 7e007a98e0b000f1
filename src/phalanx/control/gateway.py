"""Who may call which inference service through the gateway: ``ServiceAccess``.

A token is checked as the API checks it (``TokenCache``: remembered, else read from the
store off the event loop). Its holder may call a service they own, one whose
``callers`` name them, or any service as an admin; for anyone else, and for a service
that does not exist, the answer is the same (``Access.NOT_FOUND``). Each admitted call
counts as the service's activity (``Serving.saw_request``), which keeps a replica of a
predictor that scales to zero alive.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from phalanx.control.auth import Expired, TokenCache
from phalanx.control.controllers.serving import Serving
from phalanx.gateway.proxy import Access


class ServiceAccess:
    """The gateway's ``authorize`` over ``tokens`` and ``serving``'s table of callers."""

    def __init__(self, tokens: TokenCache, serving: Serving) -> None:
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
