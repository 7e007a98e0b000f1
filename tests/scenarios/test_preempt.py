"""preempt: inside a queue, a waiting gang evicts strictly lower-priority work to fit.

A victim gang with more than minAvailable tasks running gives up only its surplus; one
at its minimum is evicted whole, never left running below it. Only victims the
preemptor needs go: room counts card by card, and a victim it fits without is spared; a
share is given room on one card, the one where that costs least.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.engine import ReasonCode
from phalanx.engine.framework.config import ActionConfig
from tests.builders import (
    bound,
    config,
    cycle,
    evicted,
    make_job,
    make_node,
    make_nodes,
    make_queue,
    res,
)
from tests.scenarios.world import World

PREEMPT = config(["allocate", "preempt"], ["priority", "gang"], ["drf", "predicates", "binpack"])


def test_priority_preemption_shrinks_a_gang_to_its_minimum_and_no_further() -> None:
    world = World(nodes=make_nodes(2), queues=[make_queue()], config=PREEMPT)  # 16 GPUs
    world.submit(make_job("victim", gpus=4, replicas=4, min_available=2, priority=1))
    world.step(0)
    assert len(world.placed("victim")) == 4

    world.submit(make_job("urgent", gpus=4, replicas=2, priority=10, created=1))
    first = world.step(1)

    # two surplus tasks go; the gang keeps its minimum of two and goes on running
    assert evicted(first, "victim") == ["victim-worker-0", "victim-worker-1"]
    assert {e.by for e in first.evictions} == {"urgent"}
    assert {e.action for e in first.evictions} == {"preempt"}
    assert len(world.placed("victim")) == 2
    world.step(2)
    assert len(world.placed("urgent")) == 2

    # the gang is at its minimum now: a further preemptor takes it whole or not at all
    world.submit(make_job("more", gpus=4, priority=10, created=3))
    third = world.step(3)

    assert sorted(evicted(third, "victim")) == ["victim-worker-2", "victim-worker-3"]
    assert world.placed("victim") == []
    assert max(world.evictions_per_task().values()) == 1


def test_a_victim_gang_with_replicas_equal_to_min_available_is_evicted_whole() -> None:
    victim = make_job("victim", gpus=4, replicas=4, running_on=["n0", "n0", "n1", "n1"])
    urgent = make_job("urgent", gpus=4, priority=10, created=1)

    decisions = cycle(make_nodes(2), [victim, urgent], PREEMPT, now=5)

    assert sorted(evicted(decisions, "victim")) == [f"victim-worker-{i}" for i in range(4)]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_gang_that_would_drop_below_its_minimum_is_evicted_whole_not_left_crippled() -> None:
    # the preemptor needs 12 GPUs; shrinking the victim to its minimum frees only 8
    victim = make_job(
        "victim", gpus=4, replicas=4, min_available=2, running_on=["n0", "n0", "n1", "n1"]
    )
    urgent = make_job("urgent", gpus=4, replicas=3, priority=10, created=1)

    decisions = cycle(make_nodes(2), [victim, urgent], PREEMPT, now=5)

    assert len(evicted(decisions, "victim")) == 4
    assert len(decisions.pipelined) == 3


def test_equal_priority_never_preempts() -> None:
    running = make_job("first", gpus=8, running_on=["n0"], priority=5)
    waiting = make_job("second", gpus=8, priority=5, created=1)

    decisions = cycle(make_nodes(1), [running, waiting], PREEMPT, now=5)

    assert decisions.evictions == ()
    assert decisions.reason_for("second") is not None


def test_a_non_preemptible_job_is_never_a_victim() -> None:
    running = [
        make_job("precious", gpus=8, running_on=["n0"], preemptible=False),
        make_job("cheap", gpus=8, running_on=["n1"]),
    ]
    urgent = make_job("urgent", gpus=8, priority=10, created=1)

    decisions = cycle(make_nodes(2), [*running, urgent], PREEMPT, now=5)

    assert evicted(decisions) == ["cheap-worker-0"]


def test_preempt_never_evicts_from_another_queue() -> None:
    queues = [make_queue("a"), make_queue("b")]
    running = make_job("other", queue="b", gpus=8, running_on=["n0"])
    urgent = make_job("urgent", queue="a", gpus=8, priority=10, created=1)

    decisions = cycle(make_nodes(1), [running, urgent], PREEMPT, queues=queues, now=5)

    assert decisions.evictions == ()


def test_preemption_evicts_nothing_when_the_preemptor_gang_still_would_not_fit() -> None:
    running = [
        make_job("low", gpus=8, running_on=["n0"]),
        make_job("high", gpus=8, running_on=["n1"], priority=20),
    ]
    urgent = make_job("urgent", gpus=8, replicas=2, priority=10, created=1)

    decisions = cycle(make_nodes(2), [*running, urgent], PREEMPT, now=5)

    assert decisions.evictions == () and decisions.pipelined == ()


def test_victims_are_lowest_priority_first_and_only_as_many_as_needed() -> None:
    running = [
        make_job("p1", gpus=2, running_on=["n0"], priority=1, started=1),
        make_job("p3", gpus=2, running_on=["n0"], priority=3, started=1),
        make_job("p2", gpus=2, running_on=["n0"], priority=2, started=1),
        make_job("p4", gpus=2, running_on=["n0"], priority=4, started=1),
    ]
    urgent = make_job("urgent", gpus=4, priority=10, created=1)

    decisions = cycle(make_nodes(1), [*running, urgent], PREEMPT, now=5)

    assert [e.job for e in decisions.evictions] == ["p1", "p2"]


def test_preempted_room_goes_to_the_preemptor_in_the_next_cycle() -> None:
    world = World(nodes=make_nodes(1), queues=[make_queue()], config=PREEMPT)
    world.submit(make_job("low", gpus=8, running_on=["n0"]))
    world.submit(make_job("urgent", gpus=8, priority=10, created=1))

    first = world.step(1)
    second = world.step(2)

    assert evicted(first) == ["low-worker-0"] and bound(first, "urgent") == []
    assert bound(second, "urgent") == ["n0"] and second.evictions == ()
    reason = second.reason_for("low")
    assert reason is not None and reason.code is ReasonCode.INSUFFICIENT
    assert world.step(3).evictions == ()  # low (priority 0) cannot take it back


def test_a_queue_at_its_capability_preempts_its_own_lower_priority_work() -> None:
    # the cluster has an idle node, but the queue's cap of 8 GPUs is what binds
    cfg = config(
        ["allocate", "preempt"], ["priority", "gang"], ["drf", "predicates", "capacity", "binpack"]
    )
    queues = [make_queue("q", capability=res(gpu=8))]
    low = make_job("low", queue="q", gpus=8, running_on=["n0"])
    urgent = make_job("urgent", queue="q", gpus=8, priority=10, created=1)

    decisions = cycle(make_nodes(2), [low, urgent], cfg, queues=queues, now=5)

    assert evicted(decisions) == ["low-worker-0"]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_high_priority_job_is_admitted_to_its_capped_queue_and_preempts() -> None:
    cfg = config(
        ["enqueue", "allocate", "preempt"],
        ["priority", "gang"],
        ["drf", "predicates", "capacity", "binpack"],
    )
    world = World(nodes=make_nodes(2), queues=[make_queue("q", capability=res(gpu=8))], config=cfg)
    world.submit(make_job("low", queue="q", gpus=8, running_on=["n0"]))
    world.submit(
        make_job("urgent", queue="q", gpus=8, priority=10, created=1, phase=JobPhase.PENDING),
        make_job("peer", queue="q", gpus=8, created=2, phase=JobPhase.PENDING),
    )

    first = world.step(1)
    second = world.step(2)

    assert [a.job for a in first.admitted] == ["urgent"]  # peer could only wait: not admitted
    assert evicted(first) == ["low-worker-0"]
    assert bound(second, "urgent") == ["n0"]
    reason = second.reason_for("peer")
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT


def test_a_job_asking_more_memory_than_its_victims_hold_is_admitted_when_memory_is_free() -> None:
    # The whole cluster's GPUs are held by two low-priority jobs of little memory; the
    # urgent job needs every GPU and more memory than they hold, which the cluster has
    # free: preemption need free only the GPUs, so it is admitted and preempts.
    cfg = config(["enqueue", "allocate", "preempt"], ["priority", "gang"], ["drf", "predicates"])
    world = World(nodes=make_nodes(2), queues=[make_queue("q")], config=cfg)  # 8 GPUs each
    world.submit(
        make_job("a", queue="q", gpus=8, memory_gib=0.25, running_on=["n0"]),
        make_job("b", queue="q", gpus=8, memory_gib=0.25, running_on=["n1"]),
    )
    urgent = make_job(
        "urgent", queue="q", gpus=8, replicas=2, memory_gib=4, priority=10, created=1,
        phase=JobPhase.PENDING,
    )  # fmt: skip
    world.submit(urgent)

    first = world.step(1)

    assert [a.job for a in first.admitted] == ["urgent"]
    assert sorted(evicted(first)) == ["a-worker-0", "b-worker-0"]


def _on_cards(job: Job, *cards: int) -> Job:
    """``job`` with its one running task holding ``cards``."""
    return replace(job, tasks=tuple(replace(t, gpus=cards) for t in job.tasks))


def test_a_share_preempts_until_one_card_holds_it_and_keeps_the_victims_it_does_not_need() -> None:
    # two cards, each holding two half shares; a 0.6 share needs one card emptied. x goes
    # first in victim order (started last) but frees only half of card 0.
    node = make_node("n0", gpus=2)
    running = [
        _on_cards(make_job("x", gpus=0.5, running_on=["n0"], started=3), 0),
        _on_cards(make_job("y", gpus=0.5, running_on=["n0"], started=0), 0),
        _on_cards(make_job("z", gpus=0.5, running_on=["n0"], started=2), 1),
        _on_cards(make_job("w", gpus=0.5, running_on=["n0"], started=1), 1),
    ]
    urgent = make_job("urgent", gpus=0.6, priority=10, created=1)

    decisions = cycle([node], [*running, urgent], PREEMPT, now=5)

    # x and z free 1.0 GPU on the node but 0.5 on each card: w is needed too, and then x is not
    assert sorted(e.job for e in decisions.evictions) == ["w", "z"]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_share_evicts_on_the_one_card_where_least_is_lost() -> None:
    # neither card has 0.6 free; the 0.9 share comes first in victim order (started last),
    # but evicting the 0.5 share on the other card frees enough for less
    node = make_node("n0", gpus=2)
    running = [
        _on_cards(make_job("big", gpus=0.9, running_on=["n0"], started=3), 0),
        _on_cards(make_job("small", gpus=0.5, running_on=["n0"], started=0), 1),
    ]
    urgent = make_job("urgent", gpus=0.6, priority=10, created=1)

    decisions = cycle([node], [*running, urgent], PREEMPT, now=5)

    assert evicted(decisions) == ["small-worker-0"]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_share_passes_over_nodes_whose_victims_free_enough_only_across_cards() -> None:
    # on each trap node both cards keep a protected 0.5 share beside a 0.3 victim: evicting
    # both victims frees 0.6 on the node but never on one card. The one good node lacks
    # more on its freest card, so it ranks after all the traps.
    traps = [make_node(f"t{i}", gpus=2) for i in range(8)]
    running = [
        _on_cards(make_job(f"{kind}{i}-{card}", **shape, running_on=[f"t{i}"]), card)
        for i in range(8)
        for card in (0, 1)
        for kind, shape in (("keep", {"gpus": 0.5, "priority": 20}), ("low", {"gpus": 0.3}))
    ]
    good = make_node("u", gpus=1)
    running.append(_on_cards(make_job("victim", gpus=0.9, running_on=["u"]), 0))
    urgent = make_job("urgent", gpus=0.6, priority=10, created=1)

    decisions = cycle([*traps, good], [*running, urgent], PREEMPT, now=5)

    assert evicted(decisions) == ["victim-worker-0"]
    assert [(p.job, p.node) for p in decisions.pipelined] == [("urgent", "u")]


def test_a_share_short_of_cpu_too_evicts_gpu_less_victims_beside_the_ones_on_its_card() -> None:
    # the card needs the 0.5 share gone, and the cpu needs the cpu-only job gone as well
    node = make_node("n0", cpu=4, gpus=1)
    running = [
        make_job("hog", gpus=0, cpu=3, running_on=["n0"], started=2),
        _on_cards(make_job("share", gpus=0.5, cpu=1, running_on=["n0"], started=1), 0),
    ]
    urgent = make_job("urgent", gpus=0.6, cpu=2, priority=10, created=1)

    decisions = cycle([node], [*running, urgent], PREEMPT, now=5)

    assert sorted(e.job for e in decisions.evictions) == ["hog", "share"]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


GiB = 2**30


def _memory_node(name: str, cards: int) -> Node:
    """A node of ``cards`` 16 GiB GPUs."""
    gpus = tuple(Gpu(index=i, memory=16 * GiB) for i in range(cards))
    capacity = res(16, 64, cards) + Resources.of({"gpu-memory": cards * 16 * GiB})
    return Node(name=name, capacity=capacity, gpus=gpus)


def _memory_share(name: str, gib: float, card: int, node: str | None, **kwargs: Any) -> Job:
    """A one-task job asking for ``gib`` GiB of one card's memory, running there if ``node``."""
    job = make_job(name, running_on=[node] if node else [], **kwargs)
    resources = res(1, 1) + Resources.of({"gpu-memory": gib * GiB})
    job = replace(job, roles=(replace(job.roles[0], resources=resources),))
    return _on_cards(job, card) if node else job


def test_a_memory_share_passes_over_nodes_freeing_its_memory_only_across_cards() -> None:
    # on each trap node both cards keep a protected 8 GiB share beside a 4 GiB victim:
    # evicting frees 8 GiB on a card, short of the 12 asked. The good node comes last.
    traps = [_memory_node(f"t{i}", 2) for i in range(8)]
    running = [
        _memory_share(f"{kind}{i}-{card}", gib, card, f"t{i}", priority=priority)
        for i in range(8)
        for card in (0, 1)
        for kind, gib, priority in (("keep", 8, 20), ("low", 4, 0))
    ]
    running.append(_memory_share("victim", 14, 0, "u"))
    urgent = _memory_share("urgent", 12, 0, None, priority=10, created=1)

    decisions = cycle([*traps, _memory_node("u", 1)], [*running, urgent], PREEMPT, now=5)

    assert evicted(decisions) == ["victim-worker-0"]
    assert [(p.job, p.node) for p in decisions.pipelined] == [("urgent", "u")]


def test_a_victim_taken_on_the_way_is_reprieved_when_a_later_one_frees_enough() -> None:
    running = [
        make_job("p1", gpus=2, running_on=["n0"], priority=1),
        make_job("p2", gpus=4, running_on=["n0"], priority=2),
        make_job("p3", gpus=2, running_on=["n0"], priority=3),
    ]
    urgent = make_job("urgent", gpus=4, priority=10, created=1)

    decisions = cycle(make_nodes(1), [*running, urgent], PREEMPT, now=5)

    assert [e.job for e in decisions.evictions] == ["p2"]  # p1 alone is not enough; p2 is


BUDGET_1 = replace(
    PREEMPT,
    actions=(ActionConfig(name="allocate"), ActionConfig(name="preempt", args={"victimBudget": 1})),
)


def test_a_victim_budget_of_one_never_evicts_more_than_the_preemptor_uses() -> None:
    big = make_job("big", gpus=8, cpu=8, running_on=["n0"])
    urgent = make_job("urgent", gpus=1, cpu=1, priority=10, created=1)

    assert evicted(cycle(make_nodes(1), [big, urgent], PREEMPT, now=5)) == ["big-worker-0"]
    within = cycle(make_nodes(1), [big, urgent], BUDGET_1, now=5)
    assert within.evictions == () and within.pipelined == ()

    small = [make_job(f"s{i}", gpus=1, cpu=1, running_on=["n0"], started=i) for i in range(8)]
    decisions = cycle(make_nodes(1), [*small, urgent], BUDGET_1, now=5)
    assert evicted(decisions) == ["s7-worker-0"]  # one GPU for one GPU: the latest started
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_victim_budget_passes_over_a_victim_too_big_for_it_to_a_smaller_one() -> None:
    # the 4-GPU victim started last, so it comes first in victim order; evicting it alone
    # would be room enough but over budget, so a 1-GPU victim goes instead
    running = [
        make_job("big", gpus=4, cpu=4, running_on=["n0"], started=9),
        *(make_job(f"s{i}", gpus=1, cpu=1, running_on=["n0"], started=i) for i in range(4)),
    ]
    urgent = make_job("urgent", gpus=1, cpu=1, priority=10, created=1)

    decisions = cycle(make_nodes(1), [*running, urgent], BUDGET_1, now=10)

    assert evicted(decisions) == ["s3-worker-0"]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_victim_budget_passes_over_a_victim_that_would_overspend_it_to_the_next() -> None:
    # two GPUs, two CPUs, 2 GiB to spend: a (first in victim order) and b together free two
    # GPUs but hold 2.5 CPUs; a and c do it within the budget
    running = [
        make_job("keep", gpus=5, cpu=1, running_on=["n0"], preemptible=False),
        make_job("a", gpus=1, cpu=1.5, running_on=["n0"], started=9),
        make_job("b", gpus=1, cpu=1, running_on=["n0"], started=8),
        make_job("c", gpus=1, cpu=0.25, running_on=["n0"], started=7),
    ]
    urgent = make_job("urgent", gpus=2, cpu=2, memory_gib=2, priority=10, created=1)

    decisions = cycle(make_nodes(1), [*running, urgent], BUDGET_1, now=10)

    assert sorted(evicted(decisions)) == ["a-worker-0", "c-worker-0"]
    assert [p.job for p in decisions.pipelined] == ["urgent"]


def test_a_victim_budget_of_one_keeps_a_cpu_only_task_off_gpu_jobs() -> None:
    # the GPU job holds no more CPU than the preemptor asks for, but GPUs it would not use
    node = make_node("n0", cpu=2, gpus=8)
    gpu_job = make_job("gpu", gpus=1, cpu=1, running_on=["n0"], started=2)
    cpu_job = make_job("cpu", gpus=0, cpu=1, running_on=["n0"], started=1)
    urgent = make_job("urgent", gpus=0, cpu=1, priority=10, created=1)

    decisions = cycle([node], [gpu_job, cpu_job, urgent], BUDGET_1, now=5)

    assert evicted(decisions) == ["cpu-worker-0"]


def test_a_victim_budget_counts_what_the_whole_preempting_gang_will_use() -> None:
    # a gang of two 4-GPU tasks against a lower-priority gang of two 4-GPU tasks: each
    # victim task goes with its gang (8 GPUs), which is what the preemptor will use
    low = make_job("low", gpus=4, replicas=2, running_on=["n0", "n0"])
    high = make_job("high", gpus=4, replicas=2, priority=10, created=1)

    decisions = cycle(make_nodes(1), [low, high], BUDGET_1, now=5)

    assert evicted(decisions) == ["low-worker-0", "low-worker-1"]
    assert [p.job for p in decisions.pipelined] == ["high", "high"]
    # one 4-GPU task does not take the 8-GPU gang down
    alone = make_job("alone", gpus=4, priority=10, created=1)
    assert evicted(cycle(make_nodes(1), [low, alone], BUDGET_1, now=5)) == []


def test_room_is_made_on_the_node_where_it_costs_least() -> None:
    # a started last, so it is first in victim order; but b frees what is needed with less
    running = [
        make_job("a", gpus=4, running_on=["n0"], started=5),
        make_job("keep0", gpus=4, running_on=["n0"], preemptible=False),
        make_job("b", gpus=2, running_on=["n1"], started=1),
        make_job("keep1", gpus=6, running_on=["n1"], preemptible=False),
    ]
    urgent = make_job("urgent", gpus=2, priority=10, created=1)

    decisions = cycle(make_nodes(2), [*running, urgent], PREEMPT, now=5)

    assert evicted(decisions) == ["b-worker-0"]
    assert [(p.job, p.node) for p in decisions.pipelined] == [("urgent", "n1")]
