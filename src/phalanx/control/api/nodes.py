"""``/api/v1/nodes``: nodes with per-GPU allocation; cordon, uncordon and drain (admins)."""

from __future__ import annotations

import time

from fastapi import APIRouter
from sqlalchemy import select

from phalanx.control.api.deps import Admin, ApiError, Caller, DbSession, TheController
from phalanx.control.controllers.controller import Intent
from phalanx.control.controllers.views import NodeUsage
from phalanx.control.schemas.views import GpuView, NodeView
from phalanx.control.store.models import NodeRow

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])


@router.get("", response_model=list[NodeView])
def list_nodes(_: Caller, session: DbSession, controller: TheController) -> list[NodeView]:
    """Every node, in the cluster's order."""
    flags = {row.name: row for row in session.scalars(select(NodeRow))}
    return [_view(node, flags.get(node.name)) for node in controller.view.nodes]


@router.get("/{name}", response_model=NodeView)
def get_node(name: str, _: Caller, session: DbSession, controller: TheController) -> NodeView:
    """One node."""
    return _view(_node(controller, name), session.get(NodeRow, name))


@router.post("/{name}/cordon", response_model=NodeView)
def cordon(name: str, _: Admin, session: DbSession, controller: TheController) -> NodeView:
    """No new tasks go to the node; running ones stay."""
    return _set(name, session, controller, cordoned=True, draining=False)


@router.post("/{name}/uncordon", response_model=NodeView)
def uncordon(name: str, _: Admin, session: DbSession, controller: TheController) -> NodeView:
    """The node takes new tasks again (ends a drain too)."""
    return _set(name, session, controller, cordoned=False, draining=False)


@router.post("/{name}/drain", response_model=NodeView)
def drain(name: str, _: Admin, session: DbSession, controller: TheController) -> NodeView:
    """Cordon the node and stop its tasks; their jobs are placed again elsewhere."""
    return _set(name, session, controller, cordoned=True, draining=True)


def _set(
    name: str, session: DbSession, controller: TheController, *, cordoned: bool, draining: bool
) -> NodeView:
    node = _node(controller, name)
    row = session.get(NodeRow, name)
    if row is None:
        row = NodeRow(name=name, cordoned=cordoned, draining=draining, updated_at=time.time())
        session.add(row)
    else:
        row.cordoned, row.draining, row.updated_at = cordoned, draining, time.time()
    session.commit()
    controller.wake(Intent.NODES)
    return _view(node, row)


def _node(controller: TheController, name: str) -> NodeUsage:
    for node in controller.view.nodes:
        if node.name == name:
            return node
    raise ApiError(
        404, f"no node named {name!r}", field="name", fix="list nodes: phalanx get nodes"
    )


def _view(node: NodeUsage, row: NodeRow | None) -> NodeView:
    return NodeView(
        name=node.name,
        address=node.address,
        capacity=dict(node.capacity),
        allocated=dict(node.allocated),
        labels=dict(node.labels),
        gpus=[
            GpuView(index=i, model=model, used=used, tasks=list(tasks))
            for i, (model, used, tasks) in enumerate(
                zip(node.gpu_models, node.gpu_used, node.gpu_tasks, strict=True)
            )
        ],
        cordoned=bool(row and row.cordoned),
        draining=bool(row and row.draining),
        tasks=node.tasks,
        limits=node.limits,
        identity=node.identity,
    )
