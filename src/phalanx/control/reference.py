"""The REST API reference page, generated from the app's own OpenAPI schema.

``python -m phalanx.control.reference > docs/reference/rest-api.md`` writes it, and a test
checks that the committed page equals this output. Every route of ``create_app``, grouped
by tag in the order the app declares them: its method and path, summary, description,
parameters, body and every status it answers. The schema depends on the routes alone, so
the app is built over an in-memory database and a controller that is never called.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

from phalanx.control.app import create_app
from phalanx.control.controllers.controller import Controller
from phalanx.control.metrics import Metrics
from phalanx.control.store.database import Database

HEADER = """\
# REST API reference

Every route of the server's API, generated from its OpenAPI schema
(`python -m phalanx.control.reference > docs/reference/rest-api.md`; a test keeps this page
equal to that output). A running server serves the schema itself at `/openapi.json` and
browsable at `/docs`. Every request carries a bearer token (`Authorization: Bearer phx_...`,
see [Authentication](../auth.md)); every error answers in one shape, `{detail, field, fix}`,
plus `problems` for a request that fails validation. Two answers can come to any request:
`413` (a body over the 10 MiB limit) and `429` (the caller's address is locked out for the
seconds in `Retry-After`); the tables below leave them out.
"""

METHODS = ("get", "post", "put", "patch", "delete")
#: Answers every route documents alike, said once in the header.
COMMON = frozenset({"413", "429"})


class _NoController:
    """Stands in for the controller: building the schema never offers it a job."""

    def offer(self, stored: Sequence[object]) -> None:
        raise AssertionError("the reference never submits a job")


def schema() -> dict[str, Any]:
    """The app's OpenAPI schema, as ``/openapi.json`` serves it."""
    db = Database.open("sqlite://")
    app = create_app(db, cast(Controller, _NoController()), Metrics())
    try:
        return app.openapi()
    finally:
        app.state.submissions.close()
        db.close()


def render(document: Mapping[str, Any] | None = None) -> str:
    """The whole page, Markdown."""
    document = schema() if document is None else document
    by_tag: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method in METHODS:
            if method in operations:
                operation = operations[method]
                tag = (operation.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append(_operation(method, path, operation))
    parts = [HEADER]
    for tag, sections in by_tag.items():
        parts.append(f"## {tag}\n")
        parts.extend(sections)
    return "\n".join(parts)


def _operation(method: str, path: str, operation: Mapping[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}`\n"]
    if operation.get("summary"):
        lines.append(f"**{operation['summary']}.** {_text(operation.get('description', ''))}\n")
    parameters = operation.get("parameters", [])
    if parameters:
        lines.append("| parameter | in | type | required | meaning |")
        lines.append("|---|---|---|---|---|")
        for parameter in parameters:
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_type(parameter.get('schema', {}))} "
                f"| {'yes' if parameter.get('required') else 'no'} "
                f"| {_cell(parameter.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        shown = [
            f"`{kind}` {_type(content.get('schema', {}))}"
            for kind, content in body.get("content", {}).items()
        ]
        lines.append(f"Body: {', '.join(shown)}.\n")
    lines.append("| status | meaning |")
    lines.append("|---|---|")
    for status, answer in sorted(operation.get("responses", {}).items()):
        if status not in COMMON:
            meaning = _cell(answer.get("description", ""))
            content = answer.get("content", {}).get("application/json")
            if status.startswith("2") and content and content.get("schema"):
                meaning += f": {_type(content['schema'])}"
            lines.append(f"| {status} | {meaning} |")
    lines.append("")
    return "\n".join(lines)


def _type(schema_: Mapping[str, Any]) -> str:
    if "$ref" in schema_:
        return f"`{schema_['$ref'].rsplit('/', 1)[-1]}`"
    for key in ("anyOf", "oneOf"):
        if key in schema_:
            kinds = [_type(option) for option in schema_[key] if option.get("type") != "null"]
            return " or ".join(kinds) or "null"
    if schema_.get("type") == "array":
        return f"list of {_type(schema_.get('items', {}))}"
    if "enum" in schema_:
        return "one of " + ", ".join(f"`{value}`" for value in schema_["enum"])
    return str(schema_.get("type", "any"))


def _text(text: str) -> str:
    """A docstring as one paragraph of Markdown (reST's double backticks made single)."""
    return " ".join(text.split()).replace("``", "`").replace("<", "&lt;")


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")


if __name__ == "__main__":
    sys.stdout.write(render())
