"""``/api/v1/pipelines``: register pipelines and start runs of them.

Every user reads every pipeline; the user who registered one (or an admin) updates it.
A run belongs to the user who started it; it keeps the pipeline's document as it was,
so updating a pipeline never changes a run under way.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Request

from phalanx.control.api.deps import Caller, DbSession, document_of, errors
from phalanx.control.api.runs import poke, run_view
from phalanx.control.auth import Principal
from phalanx.control.controllers.runs import new_run
from phalanx.control.controllers.schedules import next_firing, schedule_of
from phalanx.control.errors import ApiError
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import runs as stored_runs
from phalanx.control.store.models import PipelineRow
from phalanx.control.submit import Closed, why_closed
from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline import PipelineDocument, build_graph, resolve
from phalanx.wire.bodies import NewRun
from phalanx.wire.views import PipelineView, RunView

router = APIRouter(prefix="/api/v1/pipelines", tags=["pipelines"], responses=errors(401, 422))

PipelineBody = Annotated[dict[str, Any], Body(description="a Pipeline document")]


@router.get("", response_model=list[PipelineView])
def list_pipelines(_: Caller, session: DbSession) -> list[PipelineView]:
    """Every pipeline, by name."""
    rows = stored_runs.pipelines(session)
    return [_view(row) for row in rows]


@router.get("/{name}", response_model=PipelineView, responses=errors(404))
def get_pipeline(name: str, _: Caller, session: DbSession) -> PipelineView:
    """One pipeline."""
    return _view(_existing(session, name))


@router.post("", status_code=201, response_model=PipelineView, responses=errors(400, 409))
def create_pipeline(body: PipelineBody, caller: Caller, session: DbSession) -> PipelineView:
    """Register a pipeline (409 if the name is taken: update it with PUT)."""
    document = _parse(body)
    _check_queues(session, document, caller)
    name = document.metadata.name
    held = session.get(PipelineRow, name)
    if held is not None:
        if held.user == caller.name or caller.is_admin:
            raise ApiError(
                409,
                f"pipeline {name!r} already exists",
                field="metadata.name",
                fix="update it with PUT (phalanx apply does), or choose another name",
            )
        raise ApiError(
            409,
            f"the pipeline name {name!r} is not available",
            field="metadata.name",
            fix="choose another name: pipeline names are unique across all users",
        )
    now = time.time()
    row = PipelineRow(name=name, user=caller.name, document=_dump(document))
    row.created_at = row.updated_at = row.scheduled_through = now
    session.add(row)
    session.commit()
    return _view(row)


@router.put("/{name}", response_model=PipelineView, responses=errors(400, 403, 404))
def update_pipeline(
    name: str, body: PipelineBody, caller: Caller, session: DbSession
) -> PipelineView:
    """Replace a pipeline's document (its name cannot change); runs under way keep theirs."""
    row = _existing(session, name)
    _may_change(row, caller)
    document = _parse(body)
    if document.metadata.name != name:
        raise ApiError(
            422,
            f"the document names pipeline {document.metadata.name!r}, the URL {name!r}",
            field="metadata.name",
            fix="make them equal; a pipeline cannot be renamed",
        )
    _check_queues(session, document, caller)
    now = time.time()
    stored = _dump(document)
    if schedule_of(stored) != schedule_of(row.document):  # a new one fires from now on
        row.scheduled_through = now
    row.document, row.updated_at = stored, now
    session.commit()
    return _view(row)


@router.delete("/{name}", status_code=204, responses=errors(403, 404))
def delete_pipeline(name: str, caller: Caller, session: DbSession) -> None:
    """Forget a pipeline; its runs (even those under way) are kept."""
    row = _existing(session, name)
    _may_change(row, caller)
    session.delete(row)
    session.commit()


@router.post("/{name}/runs", status_code=201, response_model=RunView, responses=errors(400, 404))
def start_run(
    name: str, body: NewRun, caller: Caller, session: DbSession, request: Request
) -> RunView:
    """Start a run of the pipeline with ``params``; it is Pending until the workflow
    controller plans it (within a tick)."""
    row = _existing(session, name)
    document = PipelineDocument.model_validate(row.document)
    _check_queues(session, document, caller)  # one may have gone since the pipeline was registered
    try:
        params = resolve(document.spec.declared_params(), body.given())
    except InvalidInput as error:
        raise ApiError(
            422, str(error).removesuffix(f"; fix: {error.fix}"), field=error.field, fix=error.fix
        ) from None
    run = new_run(
        f"{name[:40].strip('-.')}-{secrets.token_hex(4)}",
        pipeline=name,
        document=row.document,
        user=caller.name,
        params=params,
        created_at=time.time(),
        cache=body.cache,
    )
    session.add(run)
    view = run_view(session, run)  # before the commit, which ends the route's transaction
    session.commit()
    poke(request)
    return view


def _parse(body: Any) -> PipelineDocument:
    return document_of(body, PipelineDocument, "pipelines")


#: Why a step's queue would refuse its jobs, as a refusal says it (``submit.why_closed``).
_CLOSED: Final[dict[Closed, str]] = {
    "missing": "does not exist",
    "not-a-leaf": "has child queues; jobs go to leaf queues",
    "not-a-submitter": "does not list you in its submitters",
}


def _check_queues(session: DbSession, document: PipelineDocument, caller: Principal) -> None:
    """Refuse a pipeline a step of which would run its jobs, as ``caller``'s, in a queue
    that would refuse them (``submit.why_closed``): its run would fail at that step. A
    sub-pipeline step's child run is checked when it is registered and started."""
    graph = build_graph(document.spec)
    nodes = [n for n in (*graph.steps.values(), *graph.final.values()) if n.pipeline is None]
    found = stored_cluster.queue_documents(session, sorted({n.queue for n in nodes}))
    for node in nodes:
        closed = why_closed(found.get(node.queue), caller.name, admin=caller.is_admin)
        if closed is None:
            continue
        step = document.spec.steps.get(node.name) or document.spec.finally_[node.name]
        own = step.queue is not None or document.spec.defaults.queue != node.queue
        raise ApiError(
            422,
            f"step {node.name} runs its jobs in queue {node.queue!r}, which {_CLOSED[closed]}",
            field=f"spec.steps.{node.name}.queue" if own else "spec.defaults.queue",
            fix="create the queue first (phalanx apply -f queues.yaml; an admin's), or name "
            "an existing leaf queue you may submit to (phalanx get queues)",
        )


def _existing(session: DbSession, name: str) -> PipelineRow:
    row = session.get(PipelineRow, name)
    if row is None:
        raise ApiError(
            404,
            f"no pipeline named {name!r}",
            field="name",
            fix="list pipelines: phalanx get pipelines; register one: phalanx apply -f FILE",
        )
    return row


def _may_change(row: PipelineRow, caller: Principal) -> None:
    if row.user != caller.name and not caller.is_admin:
        raise ApiError(
            403,
            f"pipeline {row.name} is {row.user}'s",
            fix="ask its owner or an admin, or register your own under another name",
        )


def _dump(document: PipelineDocument) -> dict[str, Any]:
    """The document as stored: what was written, defaults left out, so that reading it
    back gives the same fields set (a job step's unset queue stays the pipeline's
    default queue, not the Job document's own default)."""
    return document.to_dict()


def _view(row: PipelineRow) -> PipelineView:
    return PipelineView(
        name=row.name,
        user=row.user,
        created_at=row.created_at,
        updated_at=row.updated_at,
        document=row.document,
        next_run_at=next_firing(
            schedule_of(row.document), max(time.time(), row.scheduled_through or 0.0)
        ),
    )
