"""A value the database refuses is answered 422 in the API's error shape, never 500."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy.exc import DataError
from starlette.requests import Request

from phalanx.control import app as app_module


def test_a_value_the_database_refuses_is_the_requests_fault() -> None:
    error = DataError("SELECT 1", {}, Exception("integer out of range\nDETAIL: more"))
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": []})

    response = asyncio.run(app_module._unstorable(request, error))

    assert response.status_code == 422
    body = json.loads(bytes(response.body))
    assert "integer out of range" in body["detail"] and "DETAIL" not in body["detail"]
    assert body["fix"]
