"""Nodes that join and die under the controller (an executor that is a ``NodeSource``,
as the Ray executor is): a new node is scheduled on, a dead one takes nothing new and
shows as not ready, and it comes back when its executor says so."""

from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.control.controllers.intents import Intent
from phalanx.control.store.models import NodeRow
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.executors.base import NodeState
from tests.unit.control.plane import NODES, Clock, FakeExecutor, Plane, controller_on

BIG = Node(name="big", capacity=Resources.of({"cpu": 8000, "memory": 32 * 2**30, "gpu": 8}))


@dataclass
class ChangingNodes(FakeExecutor):
    """A fake executor whose nodes the test changes."""

    state: NodeState = field(
        default_factory=lambda: NodeState(
            nodes=NODES, alive=frozenset(n.name for n in NODES), version=1
        )
    )

    def node_state(self) -> NodeState:
        return self.state

    def change(self, nodes: tuple[Node, ...], alive: set[str]) -> None:
        self.state = NodeState(nodes=nodes, alive=frozenset(alive), version=self.state.version + 1)


def planes(plane: Plane) -> tuple[Plane, ChangingNodes]:
    executor = ChangingNodes()
    clock = Clock()
    return Plane(plane.db, controller_on(plane.db, executor, clock), executor, clock), executor


def test_a_node_that_joins_takes_the_job_no_other_node_could(plane: Plane) -> None:
    plane, nodes = planes(plane)
    roles = [{"name": "w", "replicas": 1, "resources": {"gpu": 8}, "command": "true"}]
    plane.submit("wide", roles=roles)
    plane.tick()
    assert plane.job("wide").phase == "Queued" and not nodes.started  # no room anywhere
    nodes.change((*NODES, BIG), {"n0", "n1", "big"})
    plane.tick()
    assert [bind.node for bind in nodes.started] == ["big"]
    assert {n.name for n in plane.controller.view.nodes} == {"n0", "n1", "big"}


def test_a_dead_node_takes_no_new_task_and_is_not_ready_until_it_returns(plane: Plane) -> None:
    plane, nodes = planes(plane)
    nodes.change(NODES, {"n1"})  # n0 died
    plane.tick()
    ready = {n.name: (n.ready, n.schedulable) for n in plane.controller.view.nodes}
    assert ready == {"n0": (False, False), "n1": (True, True)}
    roles = [{"name": "w", "replicas": 2, "resources": {"gpu": 4}, "command": "true"}]
    plane.submit("two", roles=roles)
    plane.tick()
    assert plane.job("two").phase == "Pending"  # one node's room alone
    nodes.change(NODES, {"n0", "n1"})
    plane.tick()
    assert sorted(bind.node for bind in nodes.started) == ["n0", "n1"]


def test_a_cordon_holds_while_its_node_dies_and_returns(plane: Plane) -> None:
    plane, nodes = planes(plane)
    with plane.db.write() as session:
        session.add(NodeRow(name="n0", cordoned=True, draining=False, updated_at=plane.clock.now))
    plane.controller.wake(Intent.NODES)
    nodes.change(NODES, {"n1"})
    plane.tick()
    nodes.change(NODES, {"n0", "n1"})
    plane.tick()
    assert {n.name: n.schedulable for n in plane.controller.view.nodes} == {
        "n0": False,
        "n1": True,
    }
