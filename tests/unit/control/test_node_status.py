"""A node's status: NotReady, Draining while tasks stop, Drained once none is left."""

from __future__ import annotations

import pytest

from phalanx.cli.render import node_status
from phalanx.control.api.nodes import _view
from phalanx.control.controllers.views import NodeUsage
from phalanx.control.store.models import NodeRow
from phalanx.wire.views import NodeView


def _usage(*, tasks: int = 0, ready: bool = True) -> NodeUsage:
    return NodeUsage(
        name="n1",
        address=None,
        capacity={"gpu": 8},
        allocated={"gpu": 8 if tasks else 0},
        labels={},
        gpu_models=(),
        gpu_used=(),
        gpu_tasks=(),
        schedulable=False,
        tasks=tasks,
        ready=ready,
    )


def _row(*, cordoned: bool, draining: bool) -> NodeRow:
    return NodeRow(name="n1", cordoned=cordoned, draining=draining, updated_at=0.0)


@pytest.mark.parametrize(
    ("usage", "row", "status"),
    [
        (_usage(), None, "Ready"),
        (_usage(), _row(cordoned=True, draining=False), "Cordoned"),
        (_usage(tasks=2), _row(cordoned=True, draining=True), "Draining"),
        (_usage(tasks=0), _row(cordoned=True, draining=True), "Drained"),
        (_usage(tasks=0, ready=False), _row(cordoned=True, draining=True), "NotReady"),
    ],
)
def test_the_node_view_says_drained_once_a_drained_node_has_no_task(
    usage: NodeUsage, row: NodeRow | None, status: str
) -> None:
    view = _view(usage, row)

    assert view.status == status
    assert node_status(view).plain == status  # the STATUS column shows the server's word


def test_a_view_without_a_status_derives_it_from_its_flags() -> None:
    # as read from a server older than the field: the column still tells the truth
    draining = NodeView(name="n", capacity={}, allocated={}, cordoned=True, draining=True, tasks=1)
    drained = NodeView.model_validate({"name": "n", "capacity": {}, "allocated": {},
                                       "cordoned": True, "draining": True})  # fmt: skip
    assert (draining.status, drained.status) == ("Draining", "Drained")
    assert node_status(drained).plain == "Drained"
