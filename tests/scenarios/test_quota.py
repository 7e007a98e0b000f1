"""Queue quotas: proportion's water-filling, capacity's guarantee / deserved / capability,
and the queue tree (a child never exceeds its parent; siblings borrow and are reclaimed).
"""

from __future__ import annotations

from collections import Counter

import pytest

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.queue import Queue
from phalanx.engine import ReasonCode, SchedulerConfig, Snapshot
from phalanx.engine.cycle import open_session
from tests.builders import config, cycle, make_job, make_nodes, make_queue, res
from tests.scenarios.world import World

TIER1 = ["priority", "gang"]
PROPORTION = config(["allocate"], TIER1, ["drf", "predicates", "proportion", "binpack"])
CAPACITY = config(["allocate"], TIER1, ["drf", "predicates", "capacity", "binpack"])
CAPACITY_RECLAIM = config(
    ["allocate", "reclaim"], TIER1, ["drf", "predicates", "capacity", "binpack"]
)


def _jobs(queue: str, count: int, *, gpus: float, created: float = 0) -> list[Job]:
    return [
        make_job(f"{queue}{i}", queue=queue, gpus=gpus, created=created + i) for i in range(count)
    ]


def _deserved_gpus(
    nodes: int, queues: list[Queue], jobs: list[Job], cfg: SchedulerConfig
) -> dict[str, float]:
    snapshot = Snapshot.build(nodes=make_nodes(nodes), queues=queues, jobs=jobs)
    open_session(snapshot, cfg, now=0.0)
    return {q.name: snapshot.resources(snapshot.queues[q.name].deserved).get("gpu") for q in queues}


def _bound_per_queue(jobs: list[Job], decisions_binds: tuple) -> Counter[str]:
    queue_of = {j.name: j.queue for j in jobs}
    return Counter(queue_of[b.job] for b in decisions_binds)


# -- proportion ---------------------------------------------------------------------------


def test_proportion_water_fills_by_weight_and_hands_a_capped_queues_leftover_to_others() -> None:
    # 32 GPUs, weights 1:3:4 -> 4/12/16; c only asks for 8, so its other 8 go to a and b 1:3
    queues = [make_queue("a", weight=1), make_queue("b", weight=3), make_queue("c", weight=4)]
    jobs = [*_jobs("a", 10, gpus=2), *_jobs("b", 12, gpus=2), *_jobs("c", 4, gpus=2)]

    assert _deserved_gpus(4, queues, jobs, PROPORTION) == {"a": 6.0, "b": 18.0, "c": 8.0}
    decisions = cycle(make_nodes(4), jobs, PROPORTION, queues=queues)
    assert _bound_per_queue(jobs, decisions.binds) == {"a": 3, "b": 9, "c": 4}


def test_proportion_caps_a_share_at_the_queues_capability() -> None:
    queues = [
        make_queue("a", weight=1),
        make_queue("b", weight=1, capability=res(gpu=4)),
    ]
    jobs = [*_jobs("a", 16, gpus=2), *_jobs("b", 16, gpus=2)]

    assert _deserved_gpus(2, queues, jobs, PROPORTION) == {"a": 12.0, "b": 4.0}
    decisions = cycle(make_nodes(2), jobs, PROPORTION, queues=queues)
    assert _bound_per_queue(jobs, decisions.binds) == {"a": 6, "b": 2}


def test_proportion_gives_the_guarantee_first_and_splits_the_rest_by_weight() -> None:
    queues = [make_queue("a", weight=1, guarantee=res(gpu=12)), make_queue("b", weight=3)]
    jobs = [*_jobs("a", 16, gpus=1), *_jobs("b", 16, gpus=1)]

    # 12 guaranteed to a, the other 4 split 1:3
    assert _deserved_gpus(2, queues, jobs, PROPORTION) == {"a": 13.0, "b": 3.0}


def test_proportion_water_fills_down_the_queue_tree() -> None:
    # root 32 -> team 16 / ops 16; team's 16 -> nlp 12 / cv 4 (weights 3:1)
    queues = [
        make_queue("team"),
        make_queue("ops"),
        make_queue("nlp", parent="team", weight=3),
        make_queue("cv", parent="team", weight=1),
    ]
    jobs = [*_jobs("ops", 32, gpus=1), *_jobs("nlp", 32, gpus=1), *_jobs("cv", 32, gpus=1)]

    deserved = _deserved_gpus(4, queues, jobs, PROPORTION)

    assert deserved == {"team": 16.0, "ops": 16.0, "nlp": 12.0, "cv": 4.0}


def test_a_queue_at_its_proportion_share_is_told_so() -> None:
    queues = [make_queue("a", weight=1), make_queue("b", weight=1)]
    # GPU-only tasks, so that the GPU share is the whole share
    jobs = [
        make_job(f"{q}{i}", queue=q, gpus=1, cpu=0, memory_gib=0, created=i)
        for q in "ab"
        for i in range(12)
    ]

    decisions = cycle(make_nodes(2), jobs, PROPORTION, queues=queues)

    assert len(decisions.binds) == 16
    reason = decisions.reason_for("a11")
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert reason.queue == "a"
    assert "deserved share (8 GPUs; allocated 8 GPUs)" in reason.message


# -- capacity -----------------------------------------------------------------------------


def test_capacity_lets_a_queue_borrow_idle_resources_up_to_its_capability() -> None:
    queues = [make_queue("a", deserved=res(gpu=8), capability=res(gpu=16))]
    jobs = _jobs("a", 8, gpus=4)

    decisions = cycle(make_nodes(4), jobs, CAPACITY, queues=queues)  # 32 GPUs idle

    assert len(decisions.binds) == 4  # 16 GPUs: its capability, not its deserved 8
    reason = decisions.reason_for("a4")
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert "capability of 16 GPUs" in reason.message and "fix:" in reason.message


def test_capacity_splits_what_explicit_shares_leave_by_weight() -> None:
    queues = [
        make_queue("fixed", deserved=res(gpu=16)),
        make_queue("w1", weight=1),
        make_queue("w3", weight=3),
    ]

    deserved = _deserved_gpus(4, queues, [], CAPACITY)

    assert deserved == {"fixed": 16.0, "w1": 4.0, "w3": 12.0}


def test_capability_is_never_exceeded_across_cycles_parent_caps_included() -> None:
    queues = [
        make_queue("team", capability=res(gpu=12)),
        make_queue("nlp", parent="team", capability=res(gpu=8)),
        make_queue("cv", parent="team"),
        make_queue("ops"),
    ]
    cfg = config(
        ["enqueue", "allocate", "reclaim", "preempt", "backfill"],
        TIER1,
        ["drf", "predicates", "capacity", "binpack"],
    )
    world = World(nodes=make_nodes(4), queues=queues, config=cfg)  # 32 GPUs
    world.submit(*(make_job(f"nlp-burst{i}", queue="nlp", gpus=2, walltime=35) for i in range(6)))
    peak_nlp = peak_team = 0.0
    for t in range(10):
        world.submit(
            make_job(f"nlp{t}", queue="nlp", gpus=2, created=t, walltime=35),
            make_job(f"cv{t}", queue="cv", gpus=2, replicas=2, created=t, walltime=25),
            make_job(f"ops{t}", queue="ops", gpus=1, created=t, walltime=15),
        )
        world.step(float(t * 10))

        peak_nlp = max(peak_nlp, world.used("nlp"))
        peak_team = max(peak_team, world.used("nlp") + world.used("cv"))
        assert world.used("nlp") <= 8
        assert world.used("nlp") + world.used("cv") <= 12
    assert peak_nlp == 8 and peak_team == 12  # the caps did bind


# -- the queue tree: borrowing from a sibling, and giving it back ------------------------


def sibling_tree(team_cap: float | None) -> list[Queue]:
    """team (16 GPUs deserved, capped at ``team_cap``) over nlp and cv (8 each), and ops (16)."""
    return [
        make_queue(
            "team", deserved=res(gpu=16), capability=res(gpu=team_cap) if team_cap else None
        ),
        make_queue("nlp", parent="team", deserved=res(gpu=8)),
        make_queue("cv", parent="team", deserved=res(gpu=8)),
        make_queue("ops", deserved=res(gpu=16)),
    ]


@pytest.mark.parametrize("team_cap", [None, 24], ids=["uncapped-parent", "parent-at-capability"])
def test_a_child_queue_borrowing_from_its_sibling_is_reclaimed(team_cap: float | None) -> None:
    queues = sibling_tree(team_cap)
    world = World(nodes=make_nodes(4), queues=queues, config=CAPACITY_RECLAIM)  # 32 GPUs
    world.submit(*_jobs("nlp", 8, gpus=4))
    world.step(0)
    assert world.used("nlp") == (team_cap or 32)  # nlp borrowed its sibling's share and more

    world.submit(*_jobs("cv", 4, gpus=4, created=10))
    for t in range(1, 5):
        world.step(t)

    assert world.used("cv") == 8  # its deserved share, taken back from its sibling
    assert all(e.job.startswith("nlp") for _, d in world.history for e in d.evictions)

    world.submit(*_jobs("ops", 4, gpus=4, created=20))
    for t in range(5, 9):
        world.step(t)

    assert {q: world.used(q) for q in ("nlp", "cv", "ops")} == {"nlp": 8, "cv": 8, "ops": 16}
    assert max(world.evictions_per_task().values()) == 1


def test_guarantee_is_never_broken_by_reclaim_cycle_after_cycle() -> None:
    queues = [
        make_queue("keep", deserved=res(gpu=4), guarantee=res(gpu=12)),
        make_queue("x", deserved=res(gpu=10)),
        make_queue("y", deserved=res(gpu=10)),
    ]
    world = World(nodes=make_nodes(4), queues=queues, config=CAPACITY_RECLAIM)  # 32 GPUs
    world.submit(*_jobs("keep", 16, gpus=2))
    world.step(0)
    assert world.used("keep") == 32

    world.submit(*_jobs("x", 8, gpus=2, created=10), *_jobs("y", 8, gpus=2, created=20))
    for t in range(1, 12):
        world.step(t)
        assert world.used("keep") >= 12

    assert {q: world.used(q) for q in ("keep", "x", "y")} == {"keep": 12, "x": 10, "y": 10}


def test_a_child_below_its_share_is_admitted_while_its_sibling_holds_the_parent_cap() -> None:
    queues = [
        make_queue("team", deserved=res(gpu=16), capability=res(gpu=24)),
        make_queue("nlp", parent="team", deserved=res(gpu=8)),
        make_queue("cv", parent="team", deserved=res(gpu=8)),
    ]
    cfg = config(
        ["enqueue", "allocate", "reclaim", "preempt"],
        TIER1,
        ["drf", "predicates", "capacity", "binpack"],
    )
    world = World(nodes=make_nodes(4), queues=queues, config=cfg)
    world.submit(
        *(make_job(f"nlp{i}", queue="nlp", gpus=4, phase=JobPhase.PENDING) for i in range(8))
    )
    world.step(0)
    assert world.used("nlp") == 24
    world.submit(
        *(
            make_job(f"cv{i}", queue="cv", gpus=4, created=10, phase=JobPhase.PENDING)
            for i in range(4)
        )
    )

    first = world.step(1)
    world.step(2)

    # the two cv jobs within cv's share are admitted (reclaim can make room under team)
    assert [a.job for a in first.admitted] == ["cv0", "cv1"]
    assert world.used("cv") == 8 and world.used("nlp") == 16
    reason = first.reason_for("cv2")  # beyond cv's share: team's cap binds
    assert reason is not None and reason.code is ReasonCode.QUEUE_LIMIT
    assert reason.queue == "team"
