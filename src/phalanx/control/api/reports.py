"""``/api/v1/reports``: the simulator's reports in the folder the server was started
with (``phalanx up --reports DIR``), listed and served to every signed-in user.

A report is served as it is, under a Content-Security-Policy that lets a browser show
it and nothing more (``reports.POLICY``: no script, no request, an opaque origin), with
``X-Content-Type-Options: nosniff``. Names, links and sizes are checked by
``phalanx.control.reports``. Without ``--reports`` every route answers 404 with
``field`` ``--reports`` and how to share them (there is no folder to read).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import APIRouter, Request, Response
from fastapi import Path as PathParameter
from fastapi.concurrency import run_in_threadpool

from phalanx.control import reports
from phalanx.control.api.deps import Caller, errors
from phalanx.control.errors import ApiError
from phalanx.wire.views import ReportView

router = APIRouter(prefix="/api/v1/reports", tags=["reports"], responses=errors(401, 404, 422))

ReportName = Annotated[
    str, PathParameter(pattern=reports.NAME, max_length=200, description="a report's name")
]
#: The answers a report may be, each in its own media type.
_CONTENT: Final[dict[str, Any]] = {
    "text/html": {"schema": {"type": "string"}},
    "image/svg+xml": {"schema": {"type": "string"}},
    "application/json": {"schema": {}},
}


#: The ``field`` of the 404 a server without ``--reports`` answers.
NOT_SHARED: Final = "--reports"


def _root(request: Request) -> Path:
    root: Path | None = request.app.state.reports
    if root is None:
        raise ApiError(
            404,
            "this server shares no reports",
            field=NOT_SHARED,
            fix="start it with: phalanx up --reports DIR (a folder of phalanx sim compare "
            "outputs: phalanx sim compare ... --out DIR/NAME)",
        )
    return root


def _view(report: reports.Report) -> ReportView:
    return ReportView(
        name=report.name,
        media_type=report.media_type.split(";")[0],
        size=report.size,
        modified_at=report.modified_at,
        servable=report.size <= reports.MAX_BYTES,
    )


@router.get("", response_model=list[ReportView])
async def list_reports(_: Caller, request: Request) -> list[ReportView]:
    """Every report of the folder, newest first: an HTML, SVG or JSON file, or a folder
    holding ``report.html`` (symbolic links are not followed)."""
    root = _root(request)
    try:
        found = await run_in_threadpool(reports.listing, root)
    except reports.NoReport as error:
        raise ApiError(404, str(error), fix="check the folder given to --reports") from None
    return [_view(report) for report in found]


@router.get(
    "/{name}",
    response_class=Response,
    responses={200: {"content": _CONTENT, "description": "the report"}},
)
async def get_report(name: ReportName, _: Caller, request: Request) -> Response:
    """One report's bytes in its media type, under a Content-Security-Policy that lets it
    be shown and nothing more (no script, no request)."""
    root = _root(request)
    try:
        content, media_type = await run_in_threadpool(reports.read, root, name)
    except reports.NoReport as error:
        raise ApiError(
            404, str(error), field="name", fix="list the reports: GET /api/v1/reports"
        ) from None
    return Response(
        content,
        media_type=media_type,
        headers={
            "Content-Security-Policy": reports.POLICY,
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        },
    )
