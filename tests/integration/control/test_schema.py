"""Schemathesis against the live server's OpenAPI schema: whatever it sends, no 5xx, and
every answer is one the schema documents, in status code, content type and body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.control.serving import Api, running_server

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

#: Examples per operation: enough to reach each documented answer, bounded so that the
#: whole walk takes seconds.
VALID_EXAMPLES = 10
INVALID_EXAMPLES = 5


def test_every_generated_request_gets_a_documented_answer(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        job = {"name": "w", "replicas": 1, "resources": {"cpu": 1}, "command": "true"}
        api.submit("existing", "team-a", job)
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        admin = {"Authorization": f"Bearer {server.admin_token}"}
        checked = []
        for result in schema.get_all_operations():
            operation = result.ok()
            method = operation.method.upper()
            if method == "DELETE" and ("/users/" in operation.path or "/tokens/" in operation.path):
                continue  # deleting users or tokens (the admin's) would only test the fixture
            modes = [(GenerationMode.POSITIVE, VALID_EXAMPLES)]
            if list(operation.iter_parameters()) or operation.body:
                modes.append((GenerationMode.NEGATIVE, INVALID_EXAMPLES))
            for mode, examples in modes:

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(
                    max_examples=examples,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                def call(case: Any) -> None:
                    for headers in (admin, {}):  # as the admin, and with no token at all
                        response = case.call(headers=headers, timeout=30)
                        case.validate_response(response, checks=CHECKS)

                call()
            checked.append(f"{method} {operation.path}")
        assert {"POST /api/v1/jobs", "GET /api/v1/jobs/{name}/tasks"} <= set(checked)
        assert len(checked) >= 24


def test_every_route_documents_its_errors_in_the_error_shape(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        document = httpx.get(f"{server.url}/openapi.json", timeout=60).json()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    error = {"$ref": "#/components/schemas/ErrorView"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            answers = operation["responses"]
            where = f"{method.upper()} {path}"
            assert "422" in answers, f"{where} leaves out 422"
            if path.startswith("/api/"):
                assert "401" in answers, f"{where} leaves out 401"
            for status, answer in answers.items():
                if int(status) >= 400:
                    assert answer["content"] == {"application/json": {"schema": error}}, where


def test_a_refused_parameter_is_answered_in_the_documented_shape(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        listing = schema["/api/v1/jobs"]["GET"]
        case = listing.Case(query={"limit": 0})
        response = case.call(headers=headers)
        assert response.status_code == 422
        case.validate_response(response, checks=CHECKS)
        body = response.json()
        assert body["field"] == "query.limit" and body["fix"]
        assert body["problems"] == [
            {"field": "query.limit", "detail": "Input should be greater than or equal to 1"}
        ]

        # A body that is not even text: documented as 400, in the same shape, with a fix.
        answer = httpx.post(
            f"{server.url}/api/v1/jobs",
            content=b"\xff\xfe not json",
            headers={**headers, "Content-Type": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 400
        assert answer.json()["field"] == "body" and "UTF-8" in answer.json()["fix"]
        assert "400" in schema.raw_schema["paths"]["/api/v1/jobs"]["post"]["responses"]
