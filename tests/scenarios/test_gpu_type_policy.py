"""The goodput policy on a cluster of several GPU types (Sia's setting): each elastic job
goes to the type where it gains most, sized there, never spanning two; a job measured on
one type is estimated on another from its bootstrapping point there; over the one
lifecycle under the shipped ``phalanx-default`` and ``pollux``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.domain.node import GPU_MODEL_LABEL, RECLAIMABLE_LABEL, Node
from phalanx.domain.progress import Progress, StepTiming
from phalanx.engine.lifecycle import Lifecycle
from phalanx.engine.snapshot import ON_NODE
from phalanx.engine.state import ClusterState
from phalanx.policies import load_policy
from tests.builders import make_node, make_queue
from tests.scenarios.test_elastic import _elastic_job
from tests.scenarios.test_goodput import Sized

POLICIES = ["pollux", "phalanx-default"]


def _typed(name: str, model: str, gpus: int = 4) -> Node:
    return make_node(name, gpus=gpus, labels={GPU_MODEL_LABEL: model})


class Typed(Sized):
    """``Sized`` on given nodes."""

    def __init__(self, policy: str, nodes: list[Node]) -> None:
        super().__init__(load_policy(policy).config)
        self.life = Lifecycle(ClusterState(nodes, [make_queue()]))

    def types_of(self, job: str) -> set[str]:
        life = self.life.jobs[job]
        snapshot = self.life.state.snapshot
        return {
            str(snapshot.nodes[t.node].labels[GPU_MODEL_LABEL])
            for t in self.life.tasks(life)
            if t.status in ON_NODE
        }


def _bootstrap(now: float, **seconds: float) -> Progress:
    """Only bootstrapping points: one step of 32 samples on one GPU of each type."""
    return Progress(
        time=now,
        timings=tuple(
            StepTiming(
                nodes=1,
                replicas=1,
                local_batch=32,
                step_seconds=s,
                sync_seconds=0.0,
                gpu_model=model,
            )
            for model, s in sorted(seconds.items())
        ),
    )


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("fast_on", ["A100", "T4"])
def test_each_job_goes_to_the_type_where_it_gains_most(policy: str, fast_on: str) -> None:
    # "fast" runs 5x quicker on one type than on the other; "even" only 1.25x: that type
    # goes to "fast", whichever it is (the measurements choose, not the names)
    other = "T4" if fast_on == "A100" else "A100"
    cluster = Typed(policy, [_typed("a100-0", "A100"), _typed("t4-0", "T4")])
    for name, quick in (("even", 0.4), ("fast", 0.1)):
        cluster.submit(_elastic_job(name, replicas=4, high=4, cost=30.0))
        cluster.life.report(name, _bootstrap(0.0, **{fast_on: quick, other: 0.5}))
    cluster.cycle(0.0)
    cluster.cycle(1.0)
    assert cluster.types_of("fast") == {fast_on}
    assert cluster.types_of("even") == {other}
    assert cluster.placed("fast") == 4 and cluster.placed("even") == 4


@pytest.mark.parametrize("policy", POLICIES)
def test_an_elastic_job_grows_on_its_own_type_only(policy: str) -> None:
    # a lone job that prefers A100 fills the A100 node, and never spills onto the T4s
    nodes = [_typed("a100-0", "A100"), _typed("t4-0", "T4"), _typed("t4-1", "T4")]
    cluster = Typed(policy, nodes)
    cluster.submit(_elastic_job("a", replicas=2, high=12, cost=30.0))
    report = _bootstrap(0.0, A100=0.1, T4=0.3)
    cluster.life.report("a", report)
    for at in (0.0, 100.0, 200.0, 300.0):
        cluster.cycle(at)
        # it reports each size it ran at, as a job does: it scales linearly
        ran = StepTiming(
            nodes=1,
            replicas=cluster.placed("a"),
            local_batch=32,
            step_seconds=0.1,
            sync_seconds=0.0,
            gpu_model="A100",
        )
        report = replace(report, time=at, timings=(*report.timings, ran))
        cluster.life.report("a", report)
    assert cluster.types_of("a") == {"A100"}
    assert cluster.placed("a") == 4


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_with_no_point_on_a_type_is_not_sent_there_on_a_guess(policy: str) -> None:
    # measured on T4 only: A100 counts as its slowest known type (T4), so nothing draws
    # it from the T4 the placement prefers, while a job that knows A100 is faster takes it
    cluster = Typed(policy, [_typed("a100-0", "A100"), _typed("t4-0", "T4")])
    cluster.submit(_elastic_job("blind", replicas=4, high=4, cost=30.0))
    cluster.life.report("blind", _bootstrap(0.0, T4=0.2))
    cluster.submit(_elastic_job("knows", replicas=4, high=4, cost=30.0))
    cluster.life.report("knows", _bootstrap(0.0, A100=0.1, T4=0.2))
    cluster.cycle(0.0)
    cluster.cycle(1.0)
    assert cluster.types_of("knows") == {"A100"}
    assert cluster.types_of("blind") == {"T4"}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_role_selector_holds_whatever_the_type_gains(policy: str) -> None:
    # "fast" gains 5x on A100, but its role takes T4 only: it goes to T4
    cluster = Typed(policy, [_typed("a100-0", "A100"), _typed("t4-0", "T4")])
    job = _elastic_job("fast", replicas=4, high=4, cost=30.0)
    (role,) = job.roles
    cluster.submit(replace(job, roles=(replace(role, gpu_types=("T4",)),)))
    cluster.life.report("fast", _bootstrap(0.0, A100=0.1, T4=0.5))
    cluster.cycle(0.0)
    cluster.cycle(1.0)
    assert cluster.types_of("fast") == {"T4"}


@pytest.mark.parametrize("policy", POLICIES)
def test_what_a_job_learnt_on_one_type_carries_to_another(policy: str) -> None:
    # measured on T4 only, where two replicas step four times slower than one (its
    # synchronisation dominates), with one bootstrapping point on A100, 3x faster: it is
    # sent to A100, and sized there by the T4 model projected (one GPU), not linearly
    cluster = Typed(policy, [_typed("a100-0", "A100"), _typed("t4-0", "T4")])
    cluster.submit(_elastic_job("flat", replicas=4, high=4, cost=30.0))
    learnt = Progress(
        time=0.0,
        grad_sqr=1.0,
        grad_var=0.01,
        timings=(
            StepTiming(
                nodes=1,
                replicas=1,
                local_batch=32,
                step_seconds=0.3,
                sync_seconds=0.001,
                gpu_model="T4",
            ),
            StepTiming(
                nodes=1,
                replicas=2,
                local_batch=32,
                step_seconds=1.2,
                sync_seconds=0.9,
                gpu_model="T4",
            ),
            StepTiming(
                nodes=1,
                replicas=1,
                local_batch=32,
                step_seconds=0.1,
                sync_seconds=0.001,
                gpu_model="A100",
            ),
        ),
        init_batch_size=32,
        max_batch_size=64,
        local_batch_bounds=(32, 32),
    )
    cluster.life.report("flat", learnt)
    for at in (0.0, 1.0, 100.0, 200.0):
        cluster.cycle(at)
    assert cluster.types_of("flat") == {"A100"}
    assert cluster.placed("flat") == 1


def test_a_job_that_knows_nothing_of_the_types_is_left_to_placement() -> None:
    # no timings at all: the types are alike to it and uncontended, so the policy names
    # none, and phalanx-default's placement sends an elastic job to the spot-like node
    spot = make_node("t4-0", gpus=4, labels={GPU_MODEL_LABEL: "T4", RECLAIMABLE_LABEL: "true"})
    cluster = Typed("phalanx-default", [_typed("a100-0", "A100"), spot])
    cluster.submit(_elastic_job("sweep", replicas=2, high=2, cost=30.0))
    cluster.cycle(0.0)
    cluster.cycle(1.0)
    assert cluster.types_of("sweep") == {"T4"}
