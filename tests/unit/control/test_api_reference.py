"""The REST API reference page is generated from the app's OpenAPI schema, and the
committed one is it."""

from __future__ import annotations

from pathlib import Path

from phalanx.control.reference import render, schema

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_rest_api_reference_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "reference" / "rest-api.md").read_text()
    assert committed == render(), (
        "run: .venv/bin/python -m phalanx.control.reference > docs/reference/rest-api.md"
    )


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
