"""The Ray executor holds a job bound to a live node whose agent is being replaced: it
starts nothing (so the job spends no retry), a stop ends the waiting task at once, and
a task whose node dies meanwhile is LOST. (Starting once the agent is back runs on a
real cluster: tests/integration/ray.)"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import NodeState, TaskEventKind
from phalanx.executors.launch import TaskLaunch

pytest.importorskip("ray", reason="the Ray executor needs the ray extra")

from phalanx.executors.ray.executor import RayExecutor


@dataclass
class Cluster:
    """What the executor reads of a ``RayCluster``: live nodes, and those with an agent."""

    alive: frozenset[str]
    agents: set[str] = field(default_factory=set)

    @property
    def state(self) -> NodeState:
        return NodeState(alive=self.alive)

    def with_agents(self) -> set[str]:
        return set(self.agents)

    def agent(self, node: str) -> object:
        raise KeyError(node)  # no call may reach an agent in these tests

    def records(self) -> dict[str, list[object]]:
        return {}  # the agents run nothing

    def take(self) -> list[object]:
        return []  # and report nothing


def bind(task: str, node: str) -> Bind:
    return Bind(job="j", task=task, role="worker", index=int(task[-1]), node=node)


def never_resolved(bind: Bind) -> TaskLaunch:
    raise AssertionError(f"{bind.task} was planned while its node had no agent")


def executor(cluster: Cluster) -> RayExecutor:
    return RayExecutor(cluster, never_resolved, clock=lambda: 5.0)  # type: ignore[arg-type]


def test_a_job_waits_without_an_event_while_a_node_of_it_has_no_agent() -> None:
    cluster = Cluster(alive=frozenset({"a", "b"}), agents={"a"})
    ray = executor(cluster)
    ray.start([bind("t0", "a"), bind("t1", "b")], now=1.0)
    assert ray.poll(now=2.0) == [] and ray.poll(now=3.0) == []


def test_stopped_waiting_tasks_have_ended_at_once_as_stopped() -> None:
    ray = executor(Cluster(alive=frozenset({"a", "b"}), agents={"a"}))
    ray.start([bind("t0", "a"), bind("t1", "b")], now=1.0)
    ray.stop(
        [
            Evict(job="j", task=task, node=node, action="cancel", by="j", reason="test")
            for task, node in (("t0", "a"), ("t1", "b"))
        ],
        now=2.0,
        grace=5.0,
    )
    events = ray.poll(now=2.0)
    assert [(e.kind, e.task, e.stopped) for e in events] == [
        (TaskEventKind.EXITED, "t0", True),
        (TaskEventKind.EXITED, "t1", True),
    ]
    assert ray.poll(now=3.0) == []  # nothing is left to start


def test_a_waiting_task_whose_node_dies_is_lost() -> None:
    cluster = Cluster(alive=frozenset({"a", "b"}), agents={"a"})
    ray = executor(cluster)
    ray.start([bind("t0", "a"), bind("t1", "b")], now=1.0)
    cluster.alive = frozenset({"a"})
    events = ray.poll(now=2.0)
    assert [(e.kind, e.task) for e in events] == [(TaskEventKind.LOST, "t1")]
    assert "is gone" in events[0].message
