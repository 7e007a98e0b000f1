"""``/api/v1/queues``: the queue tree. Admins create, update and delete; everyone reads."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body

from phalanx.control.api.deps import (
    Admin,
    Caller,
    DbSession,
    TheController,
    document_of,
    errors,
)
from phalanx.control.controllers.intents import Intent
from phalanx.control.controllers.views import QueueUsage
from phalanx.control.errors import ApiError
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.models import QueueRow
from phalanx.domain.queue import ROOT_QUEUE
from phalanx.spec.queue import QueueDocument
from phalanx.wire.views import QueueView

router = APIRouter(prefix="/api/v1/queues", tags=["queues"], responses=errors(401, 422))

QueueBody = Annotated[
    dict[str, Any], Body(description="a Queue document (phalanx or Volcano form)")
]


@router.get("", response_model=list[QueueView])
def list_queues(_: Caller, session: DbSession, controller: TheController) -> list[QueueView]:
    """Every queue with its quotas, allocation and job counts, by name."""
    counts: dict[str, dict[str, int]] = {}
    for (queue, phase), count in stored_jobs.count_by_queue_and_phase(session).items():
        counts.setdefault(queue, {})[phase] = count
    rows = stored_cluster.queues(session)
    usage = controller.view.queues
    return [_view(row, usage.get(row.name), counts.get(row.name, {})) for row in rows]


@router.get("/{name}", response_model=QueueView, responses=errors(404))
def get_queue(name: str, _: Caller, session: DbSession, controller: TheController) -> QueueView:
    """One queue."""
    row = _existing(session, name)
    counts = stored_jobs.count_by_phase(session, name)
    return _view(row, controller.view.queues.get(name), counts)


@router.post("", status_code=201, response_model=QueueView, responses=errors(400, 403, 409))
def create_queue(
    body: QueueBody, _: Admin, session: DbSession, controller: TheController
) -> QueueView:
    """Create a queue (409 if it exists)."""
    document = _parse(body)
    if session.get(QueueRow, document.metadata.name) is not None:
        raise ApiError(
            409,
            f"queue {document.metadata.name!r} already exists",
            field="metadata.name",
            fix="update it with PUT, or choose another name",
        )
    _check_parent(session, document)
    now = time.time()
    row = QueueRow(
        name=document.metadata.name,
        parent=document.spec.parent,
        document=_dump(document),
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.commit()
    controller.wake(Intent.QUEUES)
    return _view(row, None, {})


@router.put("/{name}", response_model=QueueView, responses=errors(400, 403, 404, 409))
def update_queue(
    name: str, body: QueueBody, _: Admin, session: DbSession, controller: TheController
) -> QueueView:
    """Replace a queue's document (its name cannot change)."""
    row = _existing(session, name)
    document = _parse(body)
    if document.metadata.name != name:
        raise ApiError(
            422,
            f"the document names queue {document.metadata.name!r}, the URL {name!r}",
            field="metadata.name",
            fix="make them equal; a queue cannot be renamed",
        )
    _check_parent(session, document)
    row.document, row.parent, row.updated_at = _dump(document), document.spec.parent, time.time()
    session.commit()
    controller.wake(Intent.QUEUES)
    return _view(row, controller.view.queues.get(name), {})


@router.delete("/{name}", status_code=204, responses=errors(403, 404, 409))
def delete_queue(name: str, _: Admin, session: DbSession, controller: TheController) -> None:
    """Delete a queue that has no child queues and no live jobs."""
    row = _existing(session, name)
    if stored_cluster.has_children(session, name):
        raise ApiError(
            409, f"queue {name} has child queues", fix="delete or move its children first"
        )
    live = stored_jobs.count_active(session, name)
    if live:
        raise ApiError(
            409,
            f"queue {name} has {live} live job(s)",
            fix="cancel them or wait for them to finish",
        )
    session.delete(row)
    session.commit()
    controller.wake(Intent.QUEUES)


def _parse(body: Any) -> QueueDocument:
    return document_of(body, QueueDocument, "queues")


def _check_parent(session: DbSession, document: QueueDocument) -> None:
    parent = document.spec.parent
    if parent == ROOT_QUEUE:
        return
    if session.get(QueueRow, parent) is None:
        raise ApiError(
            422,
            f"parent queue {parent!r} does not exist",
            field="spec.parent",
            fix="create the parent first",
        )
    live = stored_jobs.count_active(session, parent)
    if live:
        raise ApiError(
            409,
            f"queue {parent} holds {live} live job(s) and cannot become a parent",
            field="spec.parent",
            fix="choose a parent without jobs",
        )
    seen, cursor = {document.metadata.name}, parent
    while cursor != ROOT_QUEUE:
        if cursor in seen:
            raise ApiError(
                422,
                f"parent {parent!r} would make a cycle",
                field="spec.parent",
                fix="choose a parent outside this queue's subtree",
            )
        seen.add(cursor)
        found = session.get(QueueRow, cursor)
        cursor = ROOT_QUEUE if found is None else found.parent


def _existing(session: DbSession, name: str) -> QueueRow:
    row = session.get(QueueRow, name)
    if row is None:
        raise ApiError(
            404, f"no queue named {name!r}", field="name", fix="list queues: phalanx get queues"
        )
    return row


def _dump(document: QueueDocument) -> dict[str, Any]:
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)


def _view(row: QueueRow, usage: QueueUsage | None, counts: dict[str, int]) -> QueueView:
    document = QueueDocument.model_validate(row.document)
    queue = document.to_domain()
    return QueueView(
        name=row.name,
        parent=row.parent,
        weight=queue.weight,
        guarantee=dict(usage.guarantee) if usage else dict(queue.guarantee.items()),
        # not yet in the controller's view (created since its last tick): its guarantee
        deserved=dict(usage.deserved) if usage else dict(queue.guarantee.items()),
        share_computed=bool(usage and usage.computed),
        configured_deserved=None if queue.deserved is None else dict(queue.deserved.items()),
        capability=dict(usage.capability)
        if usage
        else (dict(queue.capability.items()) if queue.capability else {}),
        allocated=dict(usage.allocated) if usage else {},
        submitters=document.spec.submitters,
        jobs=counts,
        document=row.document,
    )
