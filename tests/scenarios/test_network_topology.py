"""network-topology: gangs under the lowest common switch that fits them."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from phalanx.domain.job import Job, NetworkPlacement
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.engine import Snapshot, run_cycle
from phalanx.engine.cycle import open_session
from phalanx.engine.decisions import Decisions
from phalanx.engine.placement.jobs import try_job
from tests.builders import config, cycle, make_job, make_node, make_queue

PLAIN = config(["allocate"], ["priority", "gang"], ["predicates", "binpack"])
NETWORK = config(["allocate"], ["priority", "gang"], ["predicates", "binpack", "network-topology"])
HARD = NetworkPlacement(tier="tor")
SOFT = NetworkPlacement(tier="tor", mode="soft")


def snapshot_state(snap: Snapshot) -> dict[str, object]:
    """Everything a statement may touch, as exact bytes (after tests/property's helper)."""
    state: dict[str, object] = {
        name: getattr(snap, name).tobytes()
        for name in ("used", "releasing", "pipelined", "task_count")
    }
    state["cards"] = tuple(
        value.tobytes() for value in vars(snap.cards).values() if hasattr(value, "tobytes")
    )
    for job in snap.jobs.values():
        state[job.name] = (tuple(job.counts), job.ready_count, job.allocated.tobytes())
        state[f"{job.name} tasks"] = tuple((t.status, t.node, t.gpus) for t in job.tasks)
    for queue in snap.queues.values():
        state[queue.name] = queue.allocated.tobytes()
    return state


def racks(*sizes: int, spine_of: int = 0) -> list[Node]:
    """ToR ``i`` has ``sizes[i]`` 8-GPU nodes named ``t<i>-<k>``; every ToR is under one spine
    per ``spine_of`` ToRs (0: a single spine)."""
    nodes = []
    for tor, size in enumerate(sizes):
        spine = tor // spine_of if spine_of else 0
        nodes += [
            replace(
                make_node(f"t{tor}-{k}", gpus=8),
                network={"tor": f"tor-{tor}", "spine": f"spine-{spine}"},
            )
            for k in range(size)
        ]
    return nodes


def busy(tor: int, count: int, *, name: str = "") -> Job:
    """A running job holding ``count`` whole nodes of ToR ``tor``."""
    return make_job(
        name or f"busy-{tor}",
        gpus=8,
        cpu=0,
        memory_gib=0,
        replicas=count,
        running_on=[f"t{tor}-{k}" for k in range(count)],
    )


def gang(name: str = "llm", *, tasks: int = 32, network: NetworkPlacement | None = HARD) -> Job:
    job = make_job(name, gpus=8, cpu=0, memory_gib=0, replicas=tasks, created=10)
    return replace(job, network=network)


def tors(decisions: Decisions, job: str) -> Counter[str]:
    """How many of ``job``'s binds went to each ToR."""
    return Counter(b.node.split("-")[0] for b in decisions.binds if b.job == job)


def test_the_gang_goes_to_the_fitting_tor_with_the_fewest_leftovers() -> None:
    # ToRs of 16, 40, 40 and 16 nodes; tor 2 has 6 busy nodes, so 34 free: the tightest fit
    nodes = racks(16, 40, 40, 16)
    jobs = [busy(0, 4), busy(2, 6), gang()]
    decisions = cycle(nodes, jobs, NETWORK)
    assert tors(decisions, "llm") == {"t2": 32}
    plain = cycle(nodes, jobs, PLAIN)
    assert len(tors(plain, "llm")) > 1  # without the plugin the gang straddles ToRs


def test_ties_between_equally_tight_tors_go_to_the_first_by_name() -> None:
    decisions = cycle(racks(40, 40), [gang()], NETWORK)
    assert tors(decisions, "llm") == {"t0": 32}


def test_a_hard_gang_spans_a_spine_when_the_job_allows_it() -> None:
    # no ToR has 32 free nodes; spine 1 (ToRs 2 and 3) has 32 exactly, spine 0 has 30
    nodes = racks(16, 16, 16, 16, spine_of=2)
    jobs = [busy(0, 1), busy(1, 1), gang(network=NetworkPlacement(tier="spine"))]
    decisions = cycle(nodes, jobs, NETWORK)
    assert tors(decisions, "llm") == {"t2": 16, "t3": 16}


def test_soft_spans_the_fewest_tors_when_none_has_room() -> None:
    # free nodes per ToR: 16, 6, 12, 8, 10 -> 16 + 12 + 10 >= 32: three ToRs, the roomiest
    nodes = racks(16, 16, 16, 16, 16)
    jobs = [busy(1, 10), busy(2, 4), busy(3, 8), busy(4, 6), gang(network=SOFT)]
    decisions = cycle(nodes, jobs, NETWORK)
    assert set(tors(decisions, "llm")) == {"t0", "t2", "t4"}
    assert sum(tors(decisions, "llm").values()) == 32


def test_soft_falls_back_to_the_whole_cluster() -> None:
    nodes = [*racks(16, 16), make_node("loose", gpus=8)]  # a node outside any ToR
    decisions = cycle(nodes, [gang(network=SOFT, tasks=33)], NETWORK)
    assert sum(tors(decisions, "llm").values()) == 33


def test_a_hard_gang_that_fits_no_tor_stays_pending_with_an_actionable_reason() -> None:
    nodes = racks(16, 40)
    decisions = cycle(nodes, [busy(1, 20), gang()], NETWORK)
    assert not tors(decisions, "llm")
    (reason,) = [u.reason for u in decisions.unschedulable if u.job == "llm"]
    assert reason.message == (
        "gang of 32 tasks needs one tor with 32 x gpu=8 free; the largest tor has room for 20; "
        "fix: wait for running tasks to end, set networkTopology.mode: soft, "
        "allow a higher tier (networkTopology.tier: spine) or lower the replicas to 20"
    )


def test_each_group_of_four_lands_under_one_tor() -> None:
    # free nodes per ToR: 3, 5, 4: the gang of 8 fits no ToR, but each group of 4 does
    nodes = racks(4, 6, 4)
    grouped = gang(tasks=8, network=NetworkPlacement(tier="tor", group=4))
    jobs = [busy(0, 1), busy(1, 1), grouped]
    decisions = cycle(nodes, jobs, NETWORK)
    by_index = {b.index: b.node.split("-")[0] for b in decisions.binds if b.job == "llm"}
    assert [by_index[i] for i in range(8)] == ["t2"] * 4 + ["t1"] * 4  # tightest first
    assert not tors(cycle(nodes, [*jobs[:2], gang(tasks=8)], NETWORK), "llm")


def test_a_group_that_fits_no_tor_keeps_the_whole_gang_pending() -> None:
    nodes = racks(3, 3, 3)
    grouped = gang(tasks=8, network=NetworkPlacement(tier="tor", group=4))
    decisions = cycle(nodes, [grouped], NETWORK)
    assert not tors(decisions, "llm")
    (reason,) = [u.reason for u in decisions.unschedulable if u.job == "llm"]
    assert "group 1 of 2: group of 4 tasks needs one tor" in reason.message


def test_jobs_without_the_setting_are_placed_exactly_as_before() -> None:
    nodes = racks(5, 7, 3)
    jobs = [
        busy(0, 2),
        make_job("a", gpus=4, replicas=3, created=1),
        make_job("b", gpus=8, replicas=6, created=2),
        make_job("c", gpus=2, replicas=5, created=3),
        make_job("d", gpus=8, replicas=30, created=4),  # cannot fit: same reason either way
    ]
    on, off = cycle(nodes, jobs, NETWORK), cycle(nodes, jobs, PLAIN)
    assert on.binds == off.binds
    assert on.unschedulable == off.unschedulable


def test_default_tier_confines_every_multi_task_job_softly() -> None:
    cfg = config(
        ["allocate"],
        ["priority", "gang"],
        ["predicates", "binpack", ("network-topology", {"default_tier": "tor"})],
    )
    nodes = racks(4, 8)
    decisions = cycle(nodes, [busy(1, 1), make_job("w", gpus=8, replicas=6, created=1)], cfg)
    assert tors(decisions, "w") == {"t1": 6}
    assert tors(cycle(nodes, [busy(1, 1), make_job("w", gpus=8, replicas=6)], PLAIN), "w") != {
        "t1": 6
    }


def test_an_unknown_tier_makes_the_job_invalid() -> None:
    decisions = cycle(racks(4), [gang(tasks=2, network=NetworkPlacement(tier="rack"))], NETWORK)
    (reason,) = [u.reason for u in decisions.unschedulable if u.job == "llm"]
    assert "networkTopology.tier 'rack' is not a network tier" in reason.message
    assert "fix: use one of tor, spine" in reason.message


def test_discarded_attempts_leave_the_snapshot_bit_for_bit_unchanged() -> None:
    # the queue caps the gang at 2 nodes: every offered ToR is tried, filled in part, undone
    nodes = racks(4, 4, 5)
    queue = make_queue("default", capability=Resources.of({"gpu": 16}))
    jobs = [busy(2, 1), gang(tasks=3), gang("soft", tasks=3, network=SOFT)]
    snapshot = Snapshot.build(nodes=nodes, queues=[queue], jobs=jobs)
    capped = config(
        ["allocate"],
        ["priority", "gang"],
        ["predicates", "capacity", "binpack", "network-topology"],
    )
    session = open_session(snapshot, capped, now=0.0)
    before = snapshot_state(snapshot)
    for name in ("llm", "soft"):
        assert not try_job(session, snapshot.jobs[name])
        assert snapshot_state(snapshot) == before
    assert "capability" in session.reasons["llm"].message
    decisions = run_cycle(Snapshot.build(nodes=nodes, queues=[queue], jobs=jobs), capped, now=0)
    assert not decisions.binds


PREEMPTING = config(
    ["allocate", "preempt"], ["priority", "gang"], ["predicates", "binpack", "network-topology"]
)


def _low(name: str, nodes: list[str]) -> Job:
    """A low-priority job running one 8-GPU task on each of ``nodes``."""
    return make_job(name, gpus=8, cpu=0, memory_gib=0, replicas=len(nodes), running_on=nodes)


def test_preemption_makes_room_for_a_hard_gang_under_one_tor() -> None:
    # tor 0: 2 of 4 nodes busy; tor 1: 3 of 4 busy. 3 nodes are free, but in two ToRs:
    # evicting from the cheapest nodes task by task would spread the gang over both
    nodes = racks(4, 4)
    low = [_low(f"low-{n}", [n]) for n in ("t0-0", "t0-1", "t1-0", "t1-1", "t1-2")]
    urgent = replace(gang("urgent", tasks=4), priority=10)
    decisions = cycle(nodes, [*low, urgent], PREEMPTING)

    evicted_nodes = {e.node for e in decisions.evictions}
    pipelined = Counter(p.node.split("-")[0] for p in decisions.pipelined if p.job == "urgent")
    assert evicted_nodes == {"t0-0", "t0-1"}  # the two victims tor 0 needs, no more
    assert pipelined == Counter({"t0": 4})


def test_a_hard_gang_no_tor_can_hold_even_by_preempting_evicts_nothing() -> None:
    nodes = racks(2, 2)
    low = [_low(f"low-{n}", [n]) for n in ("t0-0", "t1-0")]
    urgent = replace(gang("urgent", tasks=3), priority=10)
    decisions = cycle(nodes, [*low, urgent], PREEMPTING)

    assert decisions.evictions == ()
    assert not [p for p in decisions.pipelined if p.job == "urgent"]


def test_preemption_places_each_group_under_its_own_tor() -> None:
    # groups of 2: tor 0 and tor 1 each have one free and one busy node
    nodes = racks(2, 2, 2)
    low = [_low(f"low-{n}", [n]) for n in ("t0-0", "t1-0", "t2-0", "t2-1")]
    urgent = replace(
        gang("urgent", tasks=4, network=NetworkPlacement(tier="tor", group=2)), priority=10
    )
    decisions = cycle(nodes, [*low, urgent], PREEMPTING)

    tor_of = {p.task: p.node.split("-")[0] for p in decisions.pipelined if p.job == "urgent"}
    first, second = ({tor_of[f"urgent-worker-{i}"] for i in pair} for pair in ((0, 1), (2, 3)))
    assert len(first) == 1 and len(second) == 1  # each group of two under one ToR
    assert {e.node.split("-")[0] for e in decisions.evictions} <= first | second
