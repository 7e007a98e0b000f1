"""Elastic jobs through the one lifecycle and the shipped default policy: grow into idle
room, give growth back to waiting gangs, hysteresis, priority, and the owner's scale."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Elastic, Job, JobPhase, RescaleMode, Role
from phalanx.engine.lifecycle import (
    Event,
    EventKind,
    Lifecycle,
    Resized,
    Start,
    Stop,
    TaskEvent,
    TaskEventKind,
)
from phalanx.engine.lifecycle.effects import Effect
from phalanx.engine.snapshot import ON_NODE
from phalanx.engine.state import ClusterState
from phalanx.policies import load_policy
from tests.builders import make_job, make_node, make_nodes, make_queue, res

CONFIG = load_policy("phalanx-default").config


def _elastic_job(
    name: str = "e",
    *,
    replicas: int = 2,
    low: int = 1,
    high: int = 8,
    interval: float = 60.0,
    cost: float = 0.0,
    priority: int = 0,
    mode: RescaleMode = RescaleMode.RENDEZVOUS,
) -> Job:
    role = Role(
        name="worker",
        replicas=replicas,
        resources=res(1, 1, 1),
        elastic=Elastic(
            min_replicas=low, max_replicas=high, interval=interval, cost=cost, mode=mode
        ),
    )
    return Job(name=name, queue="default", roles=(role,), user="u", priority=priority)


class Cluster:
    """A lifecycle on ``nodes`` x 8 GPUs, driven as the controller drives it: a cycle,
    its decisions applied, every start reported started and every stop exited."""

    def __init__(self, nodes: int = 1) -> None:
        self.life = Lifecycle(ClusterState(make_nodes(nodes), [make_queue()]))
        self.now = 0.0
        self.effects: list[Effect] = []

    def submit(self, job: Job) -> None:
        self._carry_out(self.life.submit(job, now=self.now))

    def cycle(self, at: float | None = None) -> None:
        """One cycle at ``at`` (default: a second later), then the follow-ups a growth asks."""
        self.now = self.now + 1.0 if at is None else at
        for _ in range(3):
            decisions = self.life.state.cycle(CONFIG, now=self.now)
            before = len(self.effects)
            self._carry_out(self.life.apply(decisions, now=self.now))
            if not any(isinstance(e, Resized) for e in self.effects[before:]):
                break

    def finish(self, job: str) -> None:
        for task in list(self.life.tasks(self.life.jobs[job])):
            if task.status in ON_NODE:
                node = self.life.state.snapshot.nodes[task.node].name
                event = TaskEvent(
                    kind=TaskEventKind.EXITED,
                    time=self.now,
                    job=job,
                    task=task.name,
                    node=node,
                    exit_code=0,
                )
                self._carry_out(self.life.on_event(event, now=self.now))

    def scale(self, job: str, replicas: int) -> None:
        self._carry_out(self.life.scale(job, replicas, "scaled by u", now=self.now))

    def placed(self, job: str) -> int:
        life = self.life.jobs.get(job)
        return 0 if life is None else sum(t.status in ON_NODE for t in self.life.tasks(life))

    def task_names(self, job: str) -> list[str]:
        return sorted(t.name for t in self.life.tasks(self.life.jobs[job]))

    def sizes(self, job: str) -> list[int]:
        return [e.size for e in self.effects if isinstance(e, Resized) and e.job == job]

    def _carry_out(self, effects: list[Effect]) -> None:
        self.effects += effects
        for effect in effects:
            if isinstance(effect, Start):
                for bind in effect.binds:
                    started = TaskEvent(
                        kind=TaskEventKind.STARTED,
                        time=self.now,
                        job=bind.job,
                        task=bind.task,
                        node=bind.node,
                    )
                    self._carry_out(self.life.on_event(started, now=self.now))
            elif isinstance(effect, Stop):
                for evict in effect.evictions:
                    exited = TaskEvent(
                        kind=TaskEventKind.EXITED,
                        time=self.now,
                        job=evict.job,
                        task=evict.task,
                        node=evict.node,
                        exit_code=143,
                        stopped=True,
                    )
                    self._carry_out(self.life.on_event(exited, now=self.now))


def test_an_elastic_job_grows_into_idle_room_up_to_its_maximum() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=2, high=6))
    cluster.cycle()
    assert cluster.placed("e") == 2
    cluster.cycle(at=100.0)  # past its interval: it grows into the 6 idle GPUs, up to 6
    assert cluster.placed("e") == 6
    assert cluster.sizes("e") == [6]
    assert cluster.life.jobs["e"].phase is JobPhase.RUNNING
    assert cluster.life.jobs["e"].attempts == 0


def test_growth_waits_out_the_interval_and_a_grown_job_does_not_flap() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=2, high=4, interval=300.0))
    cluster.cycle(at=1.0)
    cluster.cycle(at=2.0)  # goodput waits an interval for a report before going past 2
    assert cluster.placed("e") == 2
    cluster.cycle(at=302.0)  # none came: it grows as a linear speedup says
    assert cluster.placed("e") == 4
    for second in range(303, 1300, 7):
        cluster.cycle(at=float(second))
    assert cluster.sizes("e") == [4]  # one change, then none: nothing flaps


def test_a_waiting_gang_takes_growth_back_whatever_its_priority() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=2, high=8, priority=10))
    cluster.cycle()
    cluster.cycle(at=100.0)
    assert cluster.placed("e") == 8
    cluster.submit(make_job("w", replicas=4, gpus=1, priority=0, phase=JobPhase.PENDING))
    cluster.cycle(at=101.0)
    cluster.cycle(at=102.0)
    assert cluster.placed("w") == 4
    assert cluster.placed("e") == 4  # gave back 4 of its 6 grown replicas, kept the rest
    life = cluster.life.jobs["e"]
    assert life.attempts == 0 and life.preemptions == 0 and life.phase is JobPhase.RUNNING
    shrunk = [e for e in cluster.effects if isinstance(e, Event) and e.kind is EventKind.RESIZED]
    assert "shrunk for w" in shrunk[-1].message


def test_a_lower_priority_gang_takes_back_growth_only_never_what_the_owner_asked_for() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=6, low=2, high=8, priority=10))
    cluster.cycle()
    assert cluster.placed("e") == 6
    cluster.submit(make_job("w", replicas=4, gpus=1, priority=0, phase=JobPhase.PENDING))
    for second in (100.0, 101.0, 102.0):
        cluster.cycle(at=second)
    assert cluster.placed("e") == 8  # w's gang of 4 cannot use the 2 idle GPUs: lent to e
    assert cluster.placed("w") == 0  # 2 lent GPUs are not enough; the other 6 are e's own


def test_a_higher_priority_job_preempts_the_elastic_part_first_and_costs_no_restart() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=8, low=2, high=8, priority=0))
    cluster.cycle()
    assert cluster.placed("e") == 8
    cluster.submit(make_job("hi", replicas=4, gpus=1, priority=100, phase=JobPhase.PENDING))
    cluster.cycle(at=10.0)
    cluster.cycle(at=11.0)
    assert cluster.placed("hi") == 4
    assert cluster.placed("e") == 4
    life = cluster.life.jobs["e"]
    assert life.phase is JobPhase.RUNNING and life.attempts == 0 and life.preemptions == 0


def test_the_owner_scales_within_the_range_and_the_highest_replicas_leave() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=4, low=1, high=8, interval=1e9))
    cluster.cycle()
    assert cluster.placed("e") == 4
    cluster.scale("e", 2)
    assert cluster.placed("e") == 2
    assert cluster.task_names("e") == ["e-worker-0", "e-worker-1"]
    cluster.scale("e", 5)
    cluster.cycle()
    assert cluster.placed("e") == 5
    with pytest.raises(InvalidInput, match=r"outside the elastic range 1\.\.8"):
        cluster.scale("e", 9)


def test_scaling_down_past_unplaced_replicas_stops_the_running_ones_too() -> None:
    # 6 asked on a node of 4: 2 wait unplaced. Down to 2: both waiting ones are dropped
    # and 2 running ones stop (one resize does both; the job is tracked anew between).
    cluster = Cluster()
    cluster.life = Lifecycle(ClusterState([make_node("n0", gpus=4)], [make_queue()]))
    cluster.submit(_elastic_job(replicas=4, low=1, high=8, interval=1e9))
    cluster.cycle()
    cluster.scale("e", 6)
    cluster.cycle()
    assert cluster.placed("e") == 4
    cluster.scale("e", 2)
    assert cluster.placed("e") == 2
    assert cluster.task_names("e") == ["e-worker-0", "e-worker-1"]


def test_a_restart_mode_job_restarts_its_gang_at_the_new_size_without_a_retry() -> None:
    cluster = Cluster()
    cluster.submit(_elastic_job(replicas=2, high=4, mode=RescaleMode.RESTART))
    cluster.cycle()
    cluster.cycle(at=100.0)
    cluster.cycle(at=101.0)
    assert cluster.placed("e") == 4
    life = cluster.life.jobs["e"]
    assert life.attempts == 0
    assert any(
        isinstance(e, Event) and e.kind is EventKind.RESIZED and "the gang restarted" in e.message
        for e in cluster.effects
    )
    cluster.submit(make_job("w", replicas=6, gpus=1, phase=JobPhase.PENDING))
    for second in (102.0, 103.0, 104.0):
        cluster.cycle(at=second)
    assert cluster.placed("w") == 6  # its growth was lent: taken back by a restart at 2
    assert cluster.placed("e") == 2
    assert cluster.life.jobs["e"].attempts == 0


def test_a_job_that_is_not_elastic_cannot_be_scaled() -> None:
    cluster = Cluster()
    cluster.submit(replace(make_job("f", replicas=2, phase=JobPhase.PENDING)))
    with pytest.raises(InvalidInput, match="no elastic role"):
        cluster.scale("f", 3)


def test_elastic_replicas_take_reclaimable_nodes_first_and_other_work_avoids_them() -> None:
    cluster = Cluster()
    nodes = [*make_nodes(1, prefix="on-demand"), *make_nodes(1, prefix="spot")]
    spot = replace(nodes[1], labels={"phalanx.io/reclaimable": "true"})
    cluster.life = Lifecycle(ClusterState([nodes[0], spot], [make_queue()]))
    cluster.submit(make_job("fixed", replicas=2, gpus=1, phase=JobPhase.PENDING))
    cluster.submit(_elastic_job(replicas=2, high=4))
    cluster.cycle()
    cluster.cycle(at=100.0)

    def nodes_of(job: str) -> set[str]:
        snapshot = cluster.life.state.snapshot
        return {snapshot.nodes[t.node].name for t in cluster.life.tasks(cluster.life.jobs[job])}

    assert nodes_of("fixed") == {"on-demand0"}
    assert nodes_of("e") == {"spot0"}
    assert cluster.placed("e") == 4


def test_reclaim_takes_an_elastic_jobs_replicas_above_its_minimum_and_it_runs_on() -> None:
    cluster = Cluster()
    queues = [
        make_queue("a", deserved=res(8, 32, 4)),
        make_queue("b", deserved=res(8, 32, 4)),
    ]
    cluster.life = Lifecycle(ClusterState(make_nodes(1), queues))
    borrower = replace(_elastic_job(replicas=8, low=2, high=8, interval=1e9), queue="a")
    cluster.submit(borrower)
    cluster.cycle()
    assert cluster.placed("e") == 8  # 4 of them borrowed from b
    cluster.submit(make_job("owner", queue="b", replicas=4, gpus=1, phase=JobPhase.PENDING))
    for second in (2.0, 3.0, 4.0):
        cluster.cycle(at=second)
    assert cluster.placed("owner") == 4
    assert cluster.placed("e") == 4
    life = cluster.life.jobs["e"]
    assert life.phase is JobPhase.RUNNING and life.attempts == 0 and life.preemptions == 0


def test_an_elastic_jobs_replicas_go_to_as_few_nodes_as_hold_them_its_own_first() -> None:
    cluster = Cluster()
    nodes = [make_node("n0", gpus=1), make_node("n1", gpus=1), make_node("n2", gpus=2)]
    nodes += [make_node("n3", gpus=4), make_node("n4", gpus=5)]
    cluster.life = Lifecycle(ClusterState(nodes, [make_queue()]))
    cluster.submit(_elastic_job(replicas=3, high=8))
    cluster.cycle()
    first = _nodes_of(cluster, "e")  # one node that holds all three, not the holes
    assert list(first.values()) == [3] and set(first) <= {"n3", "n4"}
    cluster.scale("e", 5)  # two more: its own node first, then one node for the rest
    cluster.cycle()
    grown = _nodes_of(cluster, "e")
    own = next(iter(first))
    assert grown[own] == (4 if own == "n3" else 5) and len(grown) == (2 if own == "n3" else 1)


def _nodes_of(cluster: Cluster, job: str) -> dict[str, int]:
    names = [n.name for n in cluster.life.state.snapshot.nodes]
    placed: dict[str, int] = {}
    for task in cluster.life.tasks(cluster.life.jobs[job]):
        if task.status in ON_NODE:
            placed[names[task.node]] = placed.get(names[task.node], 0) + 1
    return placed
