"""Schemathesis against the live server's OpenAPI schema: whatever it sends, no 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.integration.control.serving import Api, running_server


def test_no_generated_request_makes_the_server_fail(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        job = {"name": "w", "replicas": 1, "resources": {"cpu": 1}, "command": "true"}
        api.submit("existing", "team-a", job)
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        checked = []
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.method.upper() == "DELETE" and "/users/" in operation.path:
                continue  # deleting users (the admin included) would only test the fixture

            @given(case=operation.as_strategy())
            @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
            def call(case: Any) -> None:
                response = case.call(headers=headers, timeout=30)
                case.validate_response(response, checks=[not_a_server_error])

            call()
            checked.append(f"{operation.method.upper()} {operation.path}")
        assert "POST /api/v1/jobs" in checked
        assert len(checked) >= 20
