"""GangPlanner: ports asked of the node that uses them, kept across a gang's starts."""

from __future__ import annotations

import itertools

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.gangs import GangPlanner
from phalanx.executors.launch import GangMember, TaskLaunch
from phalanx.executors.rendezvous import Placement

ADDRESSES = {"a": "10.0.0.1", "b": "10.0.0.2"}


class Nodes:
    """Hands out increasing ports per node and remembers every request."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self._next = {node: itertools.count(1000 * (i + 1)) for i, node in enumerate(ADDRESSES)}

    def free_ports(self, node: str, count: int) -> list[int]:
        self.asked.append((node, count))
        return [next(self._next[node]) for _ in range(count)]


def planner(nodes: Nodes) -> GangPlanner:
    return GangPlanner(
        address_of=lambda node, declared: declared or ADDRESSES[node],
        free_ports=nodes.free_ports,
    )


def launch(role: str, index: int, node: str, gang: tuple[GangMember, ...] = ()) -> TaskLaunch:
    return TaskLaunch(
        job="j",
        task=f"{role}-{index}",
        role=role,
        index=index,
        node=node,
        command=("true",),
        job_roles=("master", "worker"),
        address=ADDRESSES[node],
        gang=gang,
    )


GANG = (
    GangMember(role="master", index=0, node="b", address=ADDRESSES["b"]),
    GangMember(role="worker", index=0, node="a", address=ADDRESSES["a"]),
    GangMember(role="worker", index=1, node="a", address=ADDRESSES["a"]),
)


def test_each_port_comes_from_its_members_node_and_the_master_port_from_rank_zeros() -> None:
    nodes = Nodes()
    starts = planner(nodes).plan(
        "j", [launch("worker", 0, "a", GANG), launch("master", 0, "b", GANG)], live={}
    )
    assert sorted(nodes.asked) == [("a", 2), ("b", 2)]  # b: the master's own and MASTER_PORT
    env = {s.launch.task: s.env for s in starts}
    assert env["master-0"]["MASTER_ADDR"] == env["worker-0"]["MASTER_ADDR"] == "10.0.0.2"
    assert env["master-0"]["MASTER_PORT"] == env["worker-0"]["MASTER_PORT"] == "2001"
    assert {s.launch.task: s.placement.port for s in starts} == {"worker-0": 1000, "master-0": 2000}
    assert env["worker-0"]["WORLD_SIZE"] == "3"


def test_a_later_start_of_the_gang_keeps_the_ports_the_first_start_announced() -> None:
    nodes = Nodes()
    gangs = planner(nodes)
    first = gangs.plan("j", [launch("master", 0, "b", GANG)], live={})
    live = {("master", 0): first[0].placement}
    later = gangs.plan("j", [launch("worker", 1, "a", GANG)], live=live)
    assert later[0].placement.port == 1001  # reserved when the master started
    assert later[0].env["MASTER_PORT"] == first[0].env["MASTER_PORT"]
    assert nodes.asked == [("b", 2), ("a", 2)]  # nothing asked the second time


def test_forget_lets_a_new_run_reserve_afresh() -> None:
    nodes = Nodes()
    gangs = planner(nodes)
    gangs.plan("j", [launch("master", 0, "b", GANG)], live={})
    gangs.forget("j")
    gangs.plan("j", [launch("master", 0, "b", GANG)], live={})
    assert nodes.asked == [("b", 2), ("a", 2), ("b", 2), ("a", 2)]


def test_a_failed_plan_reserves_nothing_new() -> None:
    def broken(node: str, count: int) -> list[int]:
        raise InvalidInput("no ports", field="ports", fix="free some")

    gangs = GangPlanner(address_of=lambda node, declared: "10.0.0.9", free_ports=broken)
    with pytest.raises(InvalidInput):
        gangs.plan("j", [launch("master", 0, "b")], live={})
    placement = Placement(role="master", index=0, node="b", host="10.0.0.2", port=7)
    with pytest.raises(InvalidInput):  # still nothing reserved: asks again
        gangs.plan("j", [launch("worker", 0, "a")], live={("master", 0): placement})
