"""``/ui/reports``: the simulator's reports the server shares (``phalanx up --reports
DIR``), and one of them shown in the page.

A report is shown in an ``<iframe sandbox>`` (no script, an opaque origin) whose
document, ``/ui/reports/{name}/raw``, is the report's bytes as the API gives them, under
the API's Content-Security-Policy (never a looser one: at least ``POLICY``): a report
cannot run script in the console's origin, nor reach the console's cookie or pages.
A server without ``--reports`` gets a page that says how to share them.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from phalanx.client import ClientError, ReportView
from phalanx.web.console import console_of
from phalanx.web.session import Signed, Visitor

router = APIRouter()

#: The least a report is served under in the console, whatever the API said.
POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)


def _listing(visitor: Visitor) -> dict[str, Any]:
    """The reports, or (a server that shares none) ``enabled`` False."""
    try:
        found: list[ReportView] = visitor.client.reports()
    except ClientError as error:
        if error.status != 404 or error.field != "--reports":
            raise
        return {"enabled": False, "reports": []}
    return {"enabled": True, "reports": found}


@router.get("/reports")
def reports_page(request: Request, visitor: Signed) -> Response:
    """The list of reports."""
    context = {"user": visitor.user, "csrf": visitor.csrf, "page": "reports", "shown": None}
    return console_of(request).templates.TemplateResponse(
        request, "reports.html", {**context, **_listing(visitor)}
    )


@router.get("/reports/{name}")
def report_page(request: Request, name: str, visitor: Signed) -> Response:
    """One report, in a sandboxed frame beside the list."""
    listing = _listing(visitor)
    shown = next((r for r in listing["reports"] if r.name == name), None)
    if shown is None and listing["enabled"]:
        found = visitor.client.report(name)  # the API's refusal, as it says it
        shown = ReportView(
            name=name,
            media_type=found.media_type.split(";")[0],
            size=len(found.content),
            modified_at=0.0,
        )
    context = {"user": visitor.user, "csrf": visitor.csrf, "page": "reports"}
    return console_of(request).templates.TemplateResponse(
        request,
        "reports.html",
        {**context, **listing, "shown": shown, "quoted": quote(name, safe="")},
    )


@router.get("/reports/{name}/raw")
def report_raw(name: str, visitor: Signed) -> Response:
    """The report's bytes, under the API's policy (and never less than ``POLICY``)."""
    found = visitor.client.report(name)
    policies = [POLICY, *([found.policy] if found.policy else [])]
    return Response(
        found.content,
        media_type=found.media_type,
        headers={
            # every policy given applies: a browser enforces the strictest of each
            "Content-Security-Policy": ", ".join(policies),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        },
    )
