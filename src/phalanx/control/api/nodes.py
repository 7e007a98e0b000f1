"""``/api/v1/nodes``: nodes with per-GPU allocation; cordon, uncordon and drain (admins).

Guarantee: a user sees the names of their own tasks on a card and only a count of the
others (``other_tasks``); admins see every name. What is allocated, and how many tasks
a node holds, everyone sees.
"""

from __future__ import annotations

import time

from fastapi import APIRouter

from phalanx.control.api.deps import Admin, Caller, DbSession, TheController, errors
from phalanx.control.auth import Principal
from phalanx.control.controllers.intents import Intent
from phalanx.control.controllers.telemetry import GpuPicture
from phalanx.control.controllers.views import NodeUsage
from phalanx.control.errors import ApiError
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.models import NodeRow
from phalanx.wire.views import GpuView, NodeView

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"], responses=errors(401, 422))


@router.get("", response_model=list[NodeView])
def list_nodes(caller: Caller, session: DbSession, controller: TheController) -> list[NodeView]:
    """Every node, in the cluster's order (task names: the caller's own, or all for admins)."""
    flags = {row.name: row for row in stored_cluster.nodes(session)}
    own = _own_tasks(session, caller)
    picture = controller.telemetry.picture
    return [_view(node, flags.get(node.name), own, picture) for node in controller.view.nodes]


@router.get("/{name}", response_model=NodeView, responses=errors(404))
def get_node(name: str, caller: Caller, session: DbSession, controller: TheController) -> NodeView:
    """One node (task names: the caller's own, or all for admins)."""
    node = _node(controller, name)
    own = _own_tasks(session, caller, node=name)
    return _view(node, session.get(NodeRow, name), own, controller.telemetry.picture)


@router.post("/{name}/cordon", response_model=NodeView, responses=errors(403, 404))
def cordon(name: str, _: Admin, session: DbSession, controller: TheController) -> NodeView:
    """No new tasks go to the node; running ones stay."""
    return _set(name, session, controller, cordoned=True, draining=False)


@router.post("/{name}/uncordon", response_model=NodeView, responses=errors(403, 404))
def uncordon(name: str, _: Admin, session: DbSession, controller: TheController) -> NodeView:
    """The node takes new tasks again (ends a drain too)."""
    return _set(name, session, controller, cordoned=False, draining=False)


@router.post("/{name}/drain", response_model=NodeView, responses=errors(403, 404))
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
    return _view(node, row, None, controller.telemetry.picture)


def node_usage(controller: TheController, name: str) -> NodeUsage:
    """The controller's view of node ``name``; 404 when it has none of that name."""
    return _node(controller, name)


def _node(controller: TheController, name: str) -> NodeUsage:
    for node in controller.view.nodes:
        if node.name == name:
            return node
    raise ApiError(
        404, f"no node named {name!r}", field="name", fix="list nodes: phalanx get nodes"
    )


_Own = frozenset[tuple[str, str]] | None


def _own_tasks(session: DbSession, caller: Principal, *, node: str | None = None) -> _Own:
    """(node, task name) of the caller's tasks placed on nodes (on ``node`` alone when
    given); None for an admin, who may see every task."""
    if caller.is_admin:
        return None
    return frozenset(stored_jobs.placed_tasks(session, caller.name, node))


def _view(
    node: NodeUsage, row: NodeRow | None, own: _Own = None, picture: GpuPicture | None = None
) -> NodeView:
    picture = picture or GpuPicture()
    readings = {card.index: card for card in picture.cards.get(node.name, ())}
    read_at = picture.read_at.get(node.name)
    gpus = []
    for i, (model, used, tasks) in enumerate(
        zip(node.gpu_models, node.gpu_used, node.gpu_tasks, strict=True)
    ):
        shown = [t for t in tasks if own is None or (node.name, t) in own]
        card = readings.get(i)
        cordon = picture.cordoned.get((node.name, i))
        gpus.append(
            GpuView(
                index=i,
                model=model,
                used=used,
                tasks=shown,
                other_tasks=len(tasks) - len(shown),
                uuid=card.uuid if card else "",
                read_at=read_at if card else None,
                utilisation=card.utilisation if card else None,
                memory_used=card.memory_used if card else None,
                memory_total=card.memory_total if card else None,
                temperature=card.temperature if card else None,
                power=card.power if card else None,
                xid=card.xid if card else 0,
                cordoned=cordon.reason if cordon else None,
                cordoned_by=cordon.source if cordon else None,
                cordoned_since=cordon.since if cordon else None,
            )
        )
    return NodeView(
        name=node.name,
        address=node.address,
        capacity=dict(node.capacity),
        allocated=dict(node.allocated),
        labels=dict(node.labels),
        network=dict(node.network),
        gpus=gpus,
        gpu_readings_absent=picture.absent.get(node.name),
        cordoned=bool(row and row.cordoned),
        draining=bool(row and row.draining),
        ready=node.ready,
        tasks=node.tasks,
        limits=node.limits,
        identity=node.identity,
    )
