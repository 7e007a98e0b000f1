"""``/api/v1/runs``: runs of pipelines, their units, and stopping them.

Users see their own runs; admins see all. The workflow controller alone changes a
run's phase and record; the API records a stop (``stop_requested``) and pokes it.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from phalanx.control.api.deps import Caller, DbSession, errors
from phalanx.control.auth import Principal
from phalanx.control.controllers.runs import RunRecord, UnitRecord, new_run, resumed_record
from phalanx.control.errors import ApiError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import runs as stored_runs
from phalanx.control.store.models import RunRow
from phalanx.control.store.runs import ACTIVE
from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline import PipelineDocument, build_graph, resolve
from phalanx.wire.bodies import ResumeRun
from phalanx.wire.views import RunPage, RunView, StepView
from phalanx.workflow import Phase, RunPhase, Unit

router = APIRouter(prefix="/api/v1/runs", tags=["runs"], responses=errors(401, 422))


def poke(request: Request) -> None:
    """Tell the workflow controller that a run changed (when the server has one)."""
    workflows = request.app.state.workflows
    if workflows is not None:
        workflows.poke()


@router.get("", response_model=RunPage, responses=errors(404))
def list_runs(
    caller: Caller,
    session: DbSession,
    pipeline: str | None = None,
    phase: Annotated[list[RunPhase] | None, Query()] = None,
    after: Annotated[
        str | None, Query(max_length=128, description="the 'next' of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> RunPage:
    """Runs, oldest first (without their units), a page at a time: your own; admins see
    every user's. Paging is by (creation time, id), so a page never repeats or skips a
    run, even as runs are made."""
    rows = stored_runs.page(
        session,
        limit=limit + 1,
        user=None if caller.is_admin else caller.name,
        pipeline=pipeline,
        phases=[p.value for p in phase or ()],
        after=None if after is None else _visible(session, after, caller, field="after"),
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return RunPage(
        items=[run_view(session, row, steps=False) for row in rows],
        next=rows[-1].id if more and rows else None,
    )


@router.get("/{run_id}", response_model=RunView, responses=errors(404))
def get_run(run_id: str, caller: Caller, session: DbSession) -> RunView:
    """One run with every unit: phase, attempt, job, times, outputs."""
    return run_view(session, _visible(session, run_id, caller))


@router.post("/{run_id}/stop", response_model=RunView, responses=errors(404))
def stop_run(run_id: str, caller: Caller, session: DbSession, request: Request) -> RunView:
    """Stop a run: no new step starts, running steps' jobs are cancelled, finally steps
    run, then the run is Cancelled."""
    row = _visible(session, run_id, caller)
    asked = row.phase in ACTIVE and not row.stop_requested
    if asked:
        row.stop_requested = True
    view = run_view(session, row)  # before the commit, which ends the route's transaction
    if asked:
        session.commit()
        poke(request)
    return view


@router.post(
    "/{run_id}/resume", status_code=201, response_model=RunView, responses=errors(400, 404, 409)
)
def resume_run(
    run_id: str, body: ResumeRun, caller: Caller, session: DbSession, request: Request
) -> RunView:
    """A new run of the ended run's document, linked to it (``resumed_from``), that reuses
    every step that succeeded (or was reused) before the failed one, or before ``from``,
    with its outputs and artifacts (recorded Cached), and runs the rest again. ``params``
    change some of the old run's params; a step that reads a changed one runs again. 409
    while the old run is still active."""
    old = _visible(session, run_id, caller)
    if old.phase in ACTIVE:
        raise ApiError(
            409,
            f"run {run_id} is still {old.phase}",
            field="id",
            fix="wait for it to end, or stop it: phalanx pipeline stop RUN",
        )
    document = PipelineDocument.model_validate(old.document)
    graph = build_graph(document.spec)
    new_id = f"{old.pipeline[:40].strip('-.')}-{secrets.token_hex(4)}"
    try:
        params: dict[str, Any] = resolve(
            document.spec.declared_params(), {**old.params, **body.given()}
        )
        record = resumed_record(
            graph,
            RunRecord.from_json(old.state),
            previous_id=old.id,
            previous_params=old.params,
            params=params,
            run_id=new_id,
            from_step=body.from_step,
        )
    except InvalidInput as error:
        raise ApiError(
            422, str(error).removesuffix(f"; fix: {error.fix}"), field=error.field, fix=error.fix
        ) from None
    run = new_run(
        new_id,
        pipeline=old.pipeline,
        document=old.document,
        user=old.user,  # its steps read the old run's artifacts, as the old run's user
        params=params,
        created_at=time.time(),
        resumes=(old.id, record),
    )
    session.add(run)
    view = run_view(session, run)  # before the commit, which ends the route's transaction
    session.commit()
    poke(request)
    return view


@router.delete("/{run_id}", response_model=RunView, responses=errors(404))
def delete_run(run_id: str, caller: Caller, session: DbSession, request: Request) -> RunView:
    """An active run is stopped (as ``/stop``); an ended one is forgotten (its jobs and
    artifacts are kept)."""
    row = _visible(session, run_id, caller)
    if row.phase in ACTIVE:
        return stop_run(run_id, caller, session, request)
    view = run_view(session, row)
    session.delete(row)
    session.commit()
    return view


def run_view(session: DbSession, row: RunRow, *, steps: bool = True) -> RunView:
    """The API's view of ``row`` (with its units when ``steps``)."""
    return RunView(
        id=row.id,
        pipeline=row.pipeline,
        user=row.user,
        phase=row.phase,
        message=row.message,
        params=row.params,
        created_at=row.created_at,
        finished_at=row.finished_at,
        stop_requested=row.stop_requested,
        resumed_from=row.resumed_from,
        parent=row.parent,
        scheduled_at=row.scheduled_at,
        cache=row.cache_mode,
        steps=_steps(session, row) if steps else [],
    )


def _steps(session: DbSession, row: RunRow) -> list[StepView]:
    """Every unit in graph order (finally steps last); a step not yet expanded or
    started is one Pending unit."""
    graph = build_graph(PipelineDocument.model_validate(row.document).spec)
    record = RunRecord.from_json(row.state)
    live = [r.job for r in record.units.values() if r.job and r.phase is Phase.RUNNING]
    started = stored_jobs.start_times(session, live) if live else {}
    views = []
    for step in [*graph.order, *graph.final]:
        units = sorted(u for u in record.units if u.step == step)
        for unit in units or [Unit(step)]:
            found = record.units.get(unit, UnitRecord())
            views.append(
                StepView(
                    unit=str(unit),
                    phase=found.phase.value,
                    attempt=found.attempt,
                    job=found.job,
                    reason=found.reason,
                    started_at=found.started_at or started.get(found.job),
                    finished_at=found.finished_at,
                    retry_at=found.retry_at,
                    after=list(graph.node(step).depends_on),
                    outputs=found.outputs,
                )
            )
    return views


def _visible(session: DbSession, run_id: str, caller: Principal, *, field: str = "id") -> RunRow:
    row = session.get(RunRow, run_id)
    # Another user's run is reported as missing: its existence is not theirs to know.
    if row is None or (not caller.is_admin and row.user != caller.name):
        raise ApiError(
            404, f"no run {run_id!r}", field=field, fix="list your runs: phalanx get runs"
        )
    return row
