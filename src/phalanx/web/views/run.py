"""``/ui/runs/{id}``: one pipeline run: its DAG drawn as SVG (a box per step, colored by
its phase, cache hits marked, with its duration and a link to its job), each step's
reason and outputs (artifact URIs and values, as the API gives them), and the forms to
stop it while it is active and to resume it (from a chosen step) once it has ended.

Another user's run is "not found", as the API says. The page refreshes the run
(``/ui/fragments/runs/{id}``) until it has ended; that answer says ``X-Phalanx-Final: 1``
from then on. A resume the API refuses (409, 422) shows the run again with its message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from phalanx.client import ClientError, RunView, StepView
from phalanx.web.console import console_of
from phalanx.web.dag import BOX_HEIGHT, BOX_WIDTH, Box, Layout, layout
from phalanx.web.session import ROOT, Signed, SignedForm, Visitor
from phalanx.web.views.runs import ENDED

router = APIRouter()

FINAL: Final = "X-Phalanx-Final"
#: A step of many units takes the first of these its units are in, in this order;
#: otherwise the phase they all share, or Succeeded (all succeeded, cached or skipped).
_DOMINANT: Final = ("Running", "Failed", "Pending", "Cancelled")
#: What a refused resume is shown with (other refusals are error pages).
_SHOWN_REFUSALS: Final = frozenset({400, 409, 422})


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One step of the run as the picture and the table show it: its units together."""

    name: str
    phase: str
    units: int
    cached: int  # units served from the cache or reused from the resumed run
    job: str  # the job of a one-unit step, if it has one
    reasons: tuple[str, ...]
    started_at: float | None
    finished_at: float | None  # None while a unit has not finished
    outputs: tuple[tuple[str, str], ...]  # (name, URI or value), unit-prefixed when many
    box: Box


def _step_name(unit: str) -> str:
    """``train[3]`` -> ``train``: a foreach item's step."""
    return unit.split("[", 1)[0]


def _phase(phases: Sequence[str]) -> str:
    for dominant in _DOMINANT:
        if dominant in phases:
            return dominant
    return phases[0] if len(set(phases)) == 1 else "Succeeded"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def steps_of(run: RunView) -> tuple[list[Step], Layout]:
    """The run's steps (in graph order) and their picture's layout."""
    by_step: dict[str, list[StepView]] = {}
    for unit in run.steps:
        by_step.setdefault(_step_name(unit.unit), []).append(unit)
    drawn = layout([(name, units[0].after) for name, units in by_step.items()])
    boxes = {box.name: box for box in drawn.boxes}
    steps = []
    for name, units in by_step.items():
        many = len(units) > 1
        starts = [u.started_at for u in units if u.started_at is not None]
        ends = [u.finished_at for u in units]
        steps.append(
            Step(
                name=name,
                phase=_phase([u.phase for u in units]),
                units=len(units),
                cached=sum(u.phase == "Cached" for u in units),
                job="" if many else units[0].job,
                reasons=tuple(dict.fromkeys(u.reason for u in units if u.reason)),
                started_at=min(starts, default=None),
                finished_at=None if None in ends else max(e for e in ends if e is not None),
                outputs=tuple(
                    (f"{u.unit}.{key}" if many else key, _text(value))
                    for u in units
                    for key, value in sorted(u.outputs.items())
                ),
                box=boxes[name],
            )
        )
    return steps, drawn


def _context(visitor: Visitor, run_id: str) -> dict[str, Any]:
    run = visitor.client.run(run_id)
    steps, drawn = steps_of(run)
    return {
        "user": visitor.user,
        "csrf": visitor.csrf,
        "run": run,
        "ended": run.phase in ENDED,
        "steps": steps,
        "drawn": drawn,
        "box_width": BOX_WIDTH,
        "box_height": BOX_HEIGHT,
        "quoted": quote(run.id, safe=""),
    }


def _page(request: Request, context: dict[str, Any], status: int = 200) -> Response:
    return console_of(request).templates.TemplateResponse(
        request, "run.html", {**context, "page": "runs"}, status_code=status
    )


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: str, visitor: Signed) -> Response:
    """The run's page."""
    return _page(request, _context(visitor, run_id))


@router.get("/fragments/runs/{run_id}")
def run_fragment(request: Request, run_id: str, visitor: Signed) -> Response:
    """The run's picture and steps alone, for the page's refresh."""
    context = _context(visitor, run_id)
    response = console_of(request).templates.TemplateResponse(
        request, "fragments/run.html", context
    )
    if context["ended"]:
        response.headers[FINAL] = "1"
    return response


@router.post("/runs/{run_id}/resume")
def resume(request: Request, run_id: str, form: SignedForm, visitor: Signed) -> Response:
    """Resume the ended run (from the step chosen, if one is), then show the new run."""
    step = form.get("from", "").strip() or None
    try:
        resumed = visitor.client.resume_run(run_id, from_step=step)
    except ClientError as error:
        if error.status not in _SHOWN_REFUSALS:
            raise
        problem = {"message": error.message(), "from": step or ""}
        status = error.status or 422
        return _page(request, {**_context(visitor, run_id), "problem": problem}, status)
    return RedirectResponse(f"{ROOT}/runs/{quote(resumed.id, safe='')}", status_code=303)


@router.post("/runs/{run_id}/stop")
def stop(run_id: str, _: SignedForm, visitor: Signed) -> Response:
    """Ask for the run to be stopped, then show it."""
    visitor.client.stop_run(run_id)
    return RedirectResponse(f"{ROOT}/runs/{quote(run_id, safe='')}", status_code=303)
