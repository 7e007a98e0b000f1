"""Goodput-sized elastic jobs through the one lifecycle (policies ``pollux`` and
``phalanx-default``): grow the job that gains most, shrink for a fair share, no flapping."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from phalanx.domain.job import JobPhase
from phalanx.domain.progress import Progress, StepTiming
from phalanx.domain.queue import Queue
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.lifecycle import Lifecycle, Resized
from phalanx.engine.state import ClusterState
from phalanx.policies import load_policy
from tests.builders import make_job, make_node, make_queue
from tests.scenarios.test_elastic import Cluster, _elastic_job, _nodes_of


class Sized(Cluster):
    """The scenario cluster under a given policy."""

    def __init__(self, config: SchedulerConfig, nodes: int = 1) -> None:
        super().__init__(nodes)
        self.config = config

    def cycle(self, at: float | None = None) -> None:
        self.now = self.now + 1.0 if at is None else at
        for _ in range(3):
            decisions = self.life.state.cycle(self.config, now=self.now)
            before = len(self.effects)
            self._carry_out(self.life.apply(decisions, now=self.now))
            if not any(isinstance(e, Resized) for e in self.effects[before:]):
                break

    def resizes(self) -> int:
        return sum(isinstance(e, Resized) for e in self.effects)


POLICIES = ["pollux", "phalanx-default"]


def _flat_report(now: float) -> Progress:
    """A job whose steps cost the same on 1 and 2 GPUs of one node: the sync dominates."""
    return Progress(
        time=now,
        grad_sqr=1.0,
        grad_var=0.01,  # a small noise scale: a larger batch gains it little
        timings=(
            StepTiming(nodes=1, replicas=1, local_batch=32, step_seconds=0.1, sync_seconds=0.001),
            StepTiming(nodes=1, replicas=2, local_batch=32, step_seconds=0.4, sync_seconds=0.3),
        ),
        init_batch_size=32,
        max_batch_size=64,
        local_batch_bounds=(32, 32),
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_a_lone_elastic_job_grows_into_the_idle_gpus(policy: str) -> None:
    cluster = Sized(load_policy(policy).config)
    cluster.submit(_elastic_job("a", replicas=2, high=8, cost=30.0))
    cluster.cycle(0.0)
    assert cluster.placed("a") == 2
    cluster.cycle(100.0)  # linear speedup until it reports: every idle GPU pays
    assert cluster.placed("a") == 8
    grown = cluster.resizes()
    cluster.cycle(130.0)  # within its interval: nothing changes
    assert cluster.resizes() == grown


@pytest.mark.parametrize("policy", POLICIES)
def test_a_newcomer_gets_a_fair_share_and_then_nothing_flaps(policy: str) -> None:
    cluster = Sized(load_policy(policy).config)
    cluster.submit(_elastic_job("a", replicas=8, high=8, cost=30.0))
    cluster.cycle(0.0)
    assert cluster.placed("a") == 8
    cluster.submit(_elastic_job("b", replicas=8, high=8, cost=30.0))
    for at in (100.0, 101.0, 102.0):
        cluster.cycle(at)
    assert cluster.placed("a") == cluster.placed("b") == 4
    settled = cluster.resizes()
    for at in (103.0, 130.0, 400.0, 1000.0):  # within the interval and long after
        cluster.cycle(at)
    assert cluster.resizes() == settled
    assert cluster.placed("a") == cluster.placed("b") == 4


def test_the_job_that_gains_more_gets_the_gpus() -> None:
    cluster = Sized(load_policy("pollux").config)
    cluster.submit(_elastic_job("flat", replicas=1, high=8, cost=30.0))
    cluster.submit(_elastic_job("linear", replicas=1, high=8, cost=30.0))
    cluster.cycle(0.0)
    cluster.life.report("flat", _flat_report(0.0))
    for at in (100.0, 200.0, 300.0, 400.0):
        cluster.cycle(at)
    assert cluster.placed("flat") == 1
    assert cluster.placed("linear") == 7


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_spread_over_holes_moves_to_a_whole_node_when_it_grows(policy: str) -> None:
    # Three nodes of 4 GPUs; fillers leave one GPU free on n0 and on n1, and hold n2.
    # The elastic job starts on those two holes; once n2 frees, it grows to 4 and its
    # two replicas in the holes move with it onto n2: one node, no preemption, no retry.
    cluster = Sized(load_policy(policy).config)
    nodes = [make_node(f"n{i}", gpus=4) for i in range(3)]
    cluster.life = Lifecycle(ClusterState(nodes, [make_queue()]))
    for name, gpus in (("f0", 3), ("f1", 3), ("f2", 4)):
        cluster.submit(make_job(name, gpus=gpus, phase=JobPhase.PENDING))
        cluster.cycle()
    cluster.submit(_elastic_job("e", replicas=2, high=4, cost=30.0))
    cluster.cycle()
    assert _nodes_of(cluster, "e") == {"n0": 1, "n1": 1}
    cluster.finish("f2")
    cluster.cycle(200.0)
    assert _nodes_of(cluster, "e") == {"n2": 4}
    moved = [e for e in cluster.effects if isinstance(e, Resized) and e.job == "e"]
    assert "moved to fewer nodes" in moved[0].reason and moved[-1].size == 4
    life = cluster.life.jobs["e"]
    assert life.phase is JobPhase.RUNNING and life.attempts == 0 and life.preemptions == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_at_its_target_but_spread_moves_to_fewer_nodes_once_its_interval_is_over(
    policy: str,
) -> None:
    # Fillers pinned by label hold half of n0 and n1 and all of n2, so the job starts
    # on two nodes; once n2 frees, a job already at its target moves there whole.
    cluster = Sized(load_policy(policy).config)
    nodes = [make_node(f"n{i}", gpus=4, labels={"at": f"n{i}"}) for i in range(3)]
    cluster.life = Lifecycle(ClusterState(nodes, [make_queue()]))
    for name, gpus, node in (("f0", 2, "n0"), ("f1", 2, "n1"), ("f2", 4, "n2")):
        pinned = make_job(name, gpus=gpus, phase=JobPhase.PENDING, node_selector={"at": node})
        cluster.submit(pinned)
        cluster.cycle()
    cluster.submit(_elastic_job("e", replicas=4, high=4, cost=30.0, interval=60.0))
    cluster.cycle()
    assert _nodes_of(cluster, "e") == {"n0": 2, "n1": 2}
    cluster.finish("f2")
    cluster.cycle(200.0)
    assert _nodes_of(cluster, "e") == {"n2": 4}
    cluster.cycle(201.0)
    cluster.cycle(400.0)  # on the fewest nodes already: it stays
    assert _nodes_of(cluster, "e") == {"n2": 4}
    assert cluster.sizes("e")[-1] == 4
    life = cluster.life.jobs["e"]
    assert life.attempts == 0 and life.preemptions == 0


def test_a_shrink_and_the_growth_it_makes_room_for_happen_in_one_session() -> None:
    # One GPU is idle; linear's target needs it and two of flat's. Growing into the idle
    # one alone would make linear wait out its interval for the rest.
    cluster = Sized(load_policy("pollux").config)
    cluster.life = Lifecycle(ClusterState([make_node("n0", gpus=5)], [make_queue()]))
    cluster.submit(_elastic_job("flat", replicas=3, high=4, cost=30.0))
    cluster.submit(_elastic_job("linear", replicas=1, high=4, cost=30.0))
    cluster.cycle(0.0)
    assert (cluster.placed("flat"), cluster.placed("linear")) == (3, 1)
    cluster.life.report("flat", _flat_report(0.0))
    cluster.cycle(100.0)  # flat gives up two GPUs and linear takes them with the idle one
    assert (cluster.placed("flat"), cluster.placed("linear")) == (1, 4)


def test_a_newcomer_that_has_measured_nothing_starts_at_most_at_an_equal_share() -> None:
    # Two jobs hold the 8 GPUs and have measured that they hardly scale; a newcomer
    # that cannot be placed asks for all 8. Its speedup is unknown (linear is assumed):
    # it starts at an equal share, 3 of 8, not at the 6 the others could give up.
    cluster = Sized(load_policy("pollux").config)
    cluster.submit(_elastic_job("a", replicas=4, high=8, cost=30.0))
    cluster.submit(_elastic_job("b", replicas=4, high=8, cost=30.0))
    cluster.cycle(0.0)
    for name in ("a", "b"):
        cluster.life.report(name, _flat_report(0.0))
    cluster.cycle(100.0)
    cluster.submit(_elastic_job("c", replicas=8, high=8, cost=30.0))
    cluster.cycle(200.0)
    assert cluster.placed("c") == 3


def _crowded(
    *,
    cost: float = 30.0,
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
    queues: list[Queue] | None = None,
) -> Sized:
    """Two GPUs; two one-GPU elastic jobs, old1 and old2, placed at 0 s; a third, new,
    submitted then (``old``, ``new``: fields of those jobs to replace)."""
    cluster = Sized(load_policy("phalanx-default").config)
    cluster.life = Lifecycle(ClusterState([make_node("n0", gpus=2)], queues or [make_queue()]))
    for name in ("old1", "old2"):
        cluster.submit(replace(_elastic_job(name, replicas=1, high=1, cost=cost), **(old or {})))
    cluster.cycle(0.0)
    cluster.submit(replace(_elastic_job("new", replicas=1, high=1, cost=cost), **(new or {})))
    return cluster


def _running(cluster: Sized) -> tuple[int, int, int]:
    return cluster.placed("old1"), cluster.placed("old2"), cluster.placed("new")


def test_when_jobs_outnumber_the_gpus_the_least_served_run() -> None:
    # The newcomer waits while the old jobs have had little service (under
    # phalanx-default's 600 GPU-s); once they have had more, the later of them is
    # suspended for it (least attained service, Tiresias' levels), and it comes back
    # when a GPU frees. Jobs of one level never displace each other.
    cluster = _crowded()
    cluster.cycle(100.0)
    assert _running(cluster) == (1, 1, 0)
    cluster.cycle(1000.0)  # the old ones have had 1,000 GPU-s each
    cluster.cycle(1001.0)  # the next tick places the newcomer in the freed GPU
    assert _running(cluster) == (1, 0, 1)
    suspended = cluster.life.jobs["old2"]
    assert suspended.phase is not JobPhase.FAILED and suspended.attempts == 0
    for at in (1002.0, 1100.0, 9000.0):  # old2 (waiting) never displaces old1 (running)
        cluster.cycle(at)
    assert _running(cluster) == (1, 0, 1)
    cluster.finish("new")
    cluster.cycle(9001.0)
    assert (cluster.placed("old1"), cluster.placed("old2")) == (1, 1)


def test_no_job_is_suspended_for_a_lower_priority_one() -> None:
    cluster = _crowded(old={"priority": 5})
    for at in (1000.0, 1001.0, 2000.0):
        cluster.cycle(at)
    assert _running(cluster) == (1, 1, 0)


def test_no_job_is_suspended_for_another_queues() -> None:
    # Across queues reclaim keeps the shares (the old jobs' queue is not reclaimable here).
    queues = [make_queue(reclaimable=False), make_queue("other")]
    cluster = _crowded(new={"queue": "other"}, queues=queues)
    for at in (1000.0, 1001.0, 2000.0):
        cluster.cycle(at)
    assert _running(cluster) == (1, 1, 0)


def test_a_job_whose_rescale_costs_much_is_suspended_only_after_ten_times_that() -> None:
    # A rescale cost of 200 s: the old jobs are not suspended at 1,000 GPU-s each (a stop
    # and a restart would cost them too much of it); at 2,500 GPU-s one is.
    cluster = _crowded(cost=200.0)
    for at in (1000.0, 1001.0):
        cluster.cycle(at)
    assert _running(cluster) == (1, 1, 0)
    for at in (2500.0, 2501.0):
        cluster.cycle(at)
    assert _running(cluster) == (1, 0, 1)


def _scaling_report(now: float, *, samples: float, total: float) -> Progress:
    """A job whose steps cost the same on 1, 2 and 4 GPUs of one node (near-linear
    speedup), ``samples`` of its ``total`` done."""
    timings = tuple(
        StepTiming(nodes=1, replicas=r, local_batch=32, step_seconds=0.1, sync_seconds=0.001)
        for r in (1, 2, 4)
    )
    return Progress(
        time=now,
        samples=samples,
        total_samples=total,
        grad_sqr=0.01,
        grad_var=100.0,  # a large noise scale: a larger batch trains as fast per sample
        timings=timings,
        init_batch_size=32,
        max_batch_size=256,
        local_batch_bounds=(32, 32),
    )


@pytest.mark.parametrize(("policy", "near", "far"), [("phalanx-default", 5, 3), ("pollux", 4, 4)])
def test_the_job_nearer_its_end_gets_more_gpus_under_phalanx_default(
    policy: str, near: int, far: int
) -> None:
    # Two alike jobs on 8 GPUs, one with a tenth of its work left, one with nine tenths:
    # weighing the remaining work (remainingExponent 0.5) gives the near one more, so it
    # ends sooner and gives its GPUs back (the mean completion time falls); Pollux's
    # objective, which cannot see the remaining work, splits them evenly.
    cluster = Sized(load_policy(policy).config)
    for name in ("near", "far"):
        cluster.submit(_elastic_job(name, replicas=4, high=8, cost=30.0))
    cluster.cycle(0.0)
    cluster.life.report("near", _scaling_report(0.0, samples=9e6, total=10e6))
    cluster.life.report("far", _scaling_report(0.0, samples=1e6, total=10e6))
    for at in (100.0, 1000.0, 2000.0):  # a change pays for itself once they have run long
        cluster.cycle(at)
    assert (cluster.placed("near"), cluster.placed("far")) == (near, far)


def test_when_jobs_outnumber_the_gpus_the_served_job_with_more_left_is_suspended() -> None:
    # As the least-served test, but old1 has nine tenths of its work left and old2 a
    # tenth: the newcomer now takes old1's GPU (before, first come first served: old2's).
    cluster = _crowded()
    cluster.life.report("old1", _scaling_report(0.0, samples=1e6, total=10e6))
    cluster.life.report("old2", _scaling_report(0.0, samples=9e6, total=10e6))
    for at in (1000.0, 1001.0):
        cluster.cycle(at)
    assert _running(cluster) == (0, 1, 1)
    for at in (1002.0, 1100.0, 1500.0):  # old1 (more left) never displaces old2
        cluster.cycle(at)
    assert _running(cluster) == (0, 1, 1)
