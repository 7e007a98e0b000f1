"""The REST API reference page says every route of the app's OpenAPI schema with its
statuses (that the committed page is the generated one: tests/unit/test_docs.py)."""

from __future__ import annotations

from phalanx.control.reference import render, schema


def test_every_route_of_the_schema_is_on_the_page_with_its_statuses() -> None:
    document = schema()
    page = render(document)
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in page, (method, path)
    submit = page.split("### `POST /api/v1/jobs`", 1)[1].split("\n### ", 1)[0]
    for status in ("| 201 |", "| 401 |", "| 409 |", "| 422 |"):
        assert status in submit, status
    assert "| 413 |" not in submit  # said once, in the header
