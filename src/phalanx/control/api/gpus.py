"""GPUs at work: ``/api/v1/jobs/{name}/gpus`` (what a job did with its cards) and
``/api/v1/nodes/{name}/gpus/{index}/cordon|uncordon`` (a card out of scheduling and back).

Guarantees: a user sees the GPU use of their own jobs only (another's is a 404, as for
the job itself); only admins cordon and uncordon cards. An uncordon of a card its
health took out lets the health rules judge it afresh from its next readings: a card
still failing one is taken out again.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Body, Path

from phalanx.control.api.deps import Admin, Caller, DbSession, TheController, errors
from phalanx.control.api.jobs import visible_job
from phalanx.control.api.nodes import node_usage
from phalanx.control.controllers.intents import Intent
from phalanx.control.errors import ApiError
from phalanx.control.store import cards as stored_cards
from phalanx.control.store import gpu_use as stored_use
from phalanx.telemetry.windows import GpuUse
from phalanx.wire.gpus import (
    CardCordonRequest,
    CardCordonView,
    CardUncordonView,
    GpuUseView,
    JobGpusView,
    TaskGpuView,
)

router = APIRouter(prefix="/api/v1", tags=["gpus"], responses=errors(401, 422))

GpuIndex = Annotated[int, Path(ge=0, le=1023, description="the card's index on its node")]


@router.get("/jobs/{name}/gpus", response_model=JobGpusView, responses=errors(404))
def job_gpus(
    name: str, caller: Caller, session: DbSession, controller: TheController
) -> JobGpusView:
    """What the job did with its GPUs: over its life, minute by minute, and each task's
    latest reading."""
    row = visible_job(session, name, caller)
    picture = controller.telemetry.picture
    windows = stored_use.of_job(session, row.id)
    current = picture.current.get(row.name)
    if current is not None and (not windows or current.start >= windows[-1].end):
        windows.append(current)
    summary = GpuUse.merged(windows)
    tasks = [
        TaskGpuView(
            task=task,
            node=node,
            gpus=list(use.gpus),
            utilisation=use.utilisation,
            memory=use.memory,
            read_at=picture.read_at.get(node, 0.0),
        )
        for (job, task), (node, use) in sorted(picture.tasks.items())
        if job == row.name
    ]
    return JobGpusView(
        job=row.name,
        summary=None if summary is None else _use_view(summary),
        windows=[_use_view(window) for window in windows],
        tasks=tasks,
        idle_since=picture.idle_since.get(row.name),
    )


@router.post(
    "/nodes/{name}/gpus/{index}/cordon",
    response_model=CardCordonView,
    responses=errors(400, 403, 404),
)
def cordon_card(
    name: str,
    index: GpuIndex,
    _: Admin,
    session: DbSession,
    controller: TheController,
    body: Annotated[CardCordonRequest | None, Body()] = None,
) -> CardCordonView:
    """Take one card out of scheduling: no new task is given it; its tasks go on. A card
    already out stays as it was (its first reason)."""
    _card(controller, name, index)
    reason = (body or CardCordonRequest()).reason
    read = controller.telemetry.picture.cards.get(name, ())
    uuid = next((card.uuid for card in read if card.index == index), "")
    stored_cards.cordon(
        session,
        stored_cards.CardCordon(
            node=name, gpu=index, uuid=uuid, reason=reason, source="admin", since=time.time()
        ),
    )
    cordon = stored_cards.cordon_of(session, name, index)
    session.commit()
    controller.wake(Intent.NODES)
    assert cordon is not None  # just written, or there before
    return CardCordonView(
        node=name, gpu=index, reason=cordon.reason, source=cordon.source, since=cordon.since
    )


@router.post(
    "/nodes/{name}/gpus/{index}/uncordon",
    response_model=CardUncordonView,
    responses=errors(403, 404),
)
def uncordon_card(
    name: str, index: GpuIndex, _: Admin, session: DbSession, controller: TheController
) -> CardUncordonView:
    """Bring one card back into scheduling (``was_cordoned`` False: it was not out)."""
    _card(controller, name, index)
    removed = stored_cards.uncordon(session, name, [index])
    session.commit()
    controller.wake(Intent.NODES)
    return CardUncordonView(node=name, gpu=index, was_cordoned=removed > 0)


def _card(controller: TheController, node: str, index: int) -> None:
    usage = node_usage(controller, node)
    if index >= len(usage.gpu_models):
        raise ApiError(
            404,
            f"node {node} has no GPU {index} (it has {len(usage.gpu_models)})",
            field="index",
            fix=f"phalanx describe node {node} lists its cards",
        )


def _use_view(use: GpuUse) -> GpuUseView:
    return GpuUseView(
        start=use.start,
        end=use.end,
        samples=use.samples,
        cards=use.cards,
        utilisation=use.utilisation,
        utilisation_peak=use.utilisation_peak,
        memory=use.memory,
        memory_peak=use.memory_peak,
    )
