"""The control plane's refusals in the API's one shape, for the routes and for the parts
under them (submissions, the body limit) alike; it imports nothing of the control plane,
so any of its parts may raise one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException

from phalanx.domain.errors import RequestRefused


class ApiError(HTTPException, RequestRefused):
    """An error answer ``{"detail", "field", "fix"}``: what is wrong, where, and what to
    do (with ``headers``, such as ``Retry-After``, sent along)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        fix: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        body: dict[str, Any] = {"detail": message}
        if field is not None:
            body["field"] = field
        if fix is not None:
            body["fix"] = fix
        super().__init__(
            status_code=status, detail=body, headers=None if headers is None else dict(headers)
        )
