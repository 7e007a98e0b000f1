"""backfill: reservations for starving jobs, and short jobs run in the reserved room meanwhile.

The headline case (the seeds' starvation problem): a 64-GPU gang on a cluster kept busy
by a steady stream of 1-GPU jobs. With backfill it gets a reservation once it starves
and starts no later than the reservation's start time; without backfill the stream
keeps taking every GPU that frees up and the gang starves for the whole horizon.
"""

from __future__ import annotations

from phalanx.domain.job import Job, JobPhase
from phalanx.engine import ReasonCode, SchedulerConfig
from tests.builders import bound, config, cycle, make_job, make_nodes, make_queue
from tests.scenarios.world import World

TIER1 = ["priority", "gang", "sla"]
TIER2 = ["drf", "predicates", "binpack"]
WITH_BACKFILL = config(["enqueue", "allocate", "backfill"], TIER1, TIER2)
WITHOUT_BACKFILL = config(["enqueue", "allocate"], TIER1, TIER2)

STEP = 10.0
HORIZON = 1300.0
SHORT = 50.0  # walltime of the stream's short jobs
LONG = 200.0  # true runtime of the stream's jobs that declare no walltime


def _busy_cluster_with_a_big_gang(cfg: SchedulerConfig) -> World:
    """8 nodes x 8 GPUs, each GPU busy with a 1-GPU job ending at 100, 110, ..., 730."""
    world = World(nodes=make_nodes(8), queues=[make_queue()], config=cfg)
    for k in range(64):
        world.submit(
            make_job(f"old{k}", gpus=1, running_on=[f"n{k // 8}"], walltime=100.0 + 10 * k)
        )
    world.submit(
        make_job("big", gpus=8, replicas=8, starvation=30, created=0, phase=JobPhase.PENDING)
    )
    return world


def _arrivals(world: World, t: float) -> None:
    """Two 1-GPU jobs arrive every step: one declares a walltime, the other does not."""
    n = int(t // STEP)
    world.submit(make_job(f"short{n}", gpus=1, created=t, walltime=SHORT, phase=JobPhase.PENDING))
    world.submit(make_job(f"long{n}", gpus=1, created=t, phase=JobPhase.PENDING), runtime=LONG)


def _drive(world: World, *, until: float) -> float | None:
    """Step every STEP seconds with arrivals; the time ``big`` was bound, if it was."""
    t = 0.0
    while t <= until:
        _arrivals(world, t)
        if bound(world.step(t), "big"):
            return t
        t += STEP
    return None


def test_64_gpu_gang_starts_within_its_reservation_despite_a_stream_of_1_gpu_jobs() -> None:
    world = _busy_cluster_with_a_big_gang(WITH_BACKFILL)

    started = _drive(world, until=HORIZON)

    reservations = [(t, r) for t, d in world.history for r in d.reservations if r.job == "big"]
    assert reservations, "the starving gang never got a reservation"
    reserved_at, first = reservations[0]
    assert 30 <= reserved_at <= 30 + 2 * STEP  # once starving (admitted, then reserved)
    assert first.start_time == 730.0  # the last of the 64 old jobs ends then
    assert len(first.nodes) == 8
    assert started is not None and started <= first.start_time
    assert len(world.placed("big")) == 8
    # the stream kept flowing: short jobs ran in the reserved room before the gang started
    backfilled = {
        b.job
        for t, d in world.history
        if reserved_at <= t < started
        for b in d.binds
        if b.job.startswith("short")
    }
    assert len(backfilled) >= 20
    # jobs without a walltime could not use the reserved room
    assert not any(
        b.job.startswith("long")
        for t, d in world.history
        if reserved_at <= t < started
        for b in d.binds
    )


def test_without_backfill_the_64_gpu_gang_starves_for_the_same_horizon() -> None:
    world = _busy_cluster_with_a_big_gang(WITHOUT_BACKFILL)

    started = _drive(world, until=HORIZON)

    assert started is None
    assert world.placed("big") == []
    assert all(d.reservations == () for _, d in world.history)
    late_binds = [b.job for t, d in world.history if t > 730 for b in d.binds]
    assert len(late_binds) > 20  # the GPUs did free up: 1-GPU jobs took every one of them


def test_reserved_job_reason_names_its_nodes_and_start_time() -> None:
    nodes = make_nodes(2)
    running = [
        make_job("r0", gpus=8, running_on=["n0"], walltime=100),
        make_job("r1", gpus=8, running_on=["n1"], walltime=200),
    ]
    big = make_job("big", gpus=8, replicas=2, starvation=10, created=0)

    decisions = cycle(nodes, [*running, big], WITH_BACKFILL, now=50)

    assert [(r.job, r.nodes, r.start_time) for r in decisions.reservations] == [
        ("big", ("n0", "n1"), 200.0)
    ]
    reason = decisions.reason_for("big")
    assert reason is not None and reason.code is ReasonCode.RESERVED
    assert "n0, n1" in reason.message and "t=200s" in reason.message


def _reserved_pair_and_three_candidates() -> list[Job]:
    """n1 is busy until t=100, n0 is idle; ``big`` (both nodes) is starving at t=50."""
    return [
        make_job("r1", gpus=8, running_on=["n1"], walltime=100),
        make_job("big", gpus=8, replicas=2, starvation=10, created=0),
        make_job("quick", gpus=4, walltime=40, created=1),
        make_job("slow", gpus=4, walltime=500, created=2),
        make_job("open", gpus=4, created=3),
    ]


def test_a_job_that_ends_before_the_reservation_backfills_and_one_that_does_not_waits() -> None:
    decisions = cycle(make_nodes(2), _reserved_pair_and_three_candidates(), WITH_BACKFILL, now=50)

    assert [(r.nodes, r.start_time) for r in decisions.reservations] == [(("n0", "n1"), 100.0)]
    assert bound(decisions, "quick") == ["n0"]  # ends at 90, before the gang starts at 100
    # 4 GPUs of n0 are still idle, but held for the gang: neither of these may take them
    assert bound(decisions, "slow") == [] and bound(decisions, "open") == []


def test_a_job_kept_off_reserved_room_is_told_so_and_how_to_backfill() -> None:
    decisions = cycle(make_nodes(2), _reserved_pair_and_three_candidates(), WITH_BACKFILL, now=50)

    for name in ("slow", "open"):
        reason = decisions.reason_for(name)
        assert reason is not None and reason.code is ReasonCode.BLOCKED_BY_RESERVATION
        assert "walltime" in reason.message


def test_runtime_estimate_is_used_when_there_is_no_walltime() -> None:
    nodes = make_nodes(1)
    running = [make_job("r0", gpus=8, running_on=["n0"], runtime_estimate=300, started=0)]
    big = make_job("big", gpus=8, starvation=10, created=0)

    decisions = cycle(nodes, [*running, big], WITH_BACKFILL, now=20)

    assert [r.start_time for r in decisions.reservations] == [300.0]


def test_no_reservation_before_the_starvation_threshold() -> None:
    nodes = make_nodes(1)
    running = [make_job("r0", gpus=8, running_on=["n0"], walltime=100)]
    big = make_job("big", gpus=8, starvation=60, created=0)

    early = cycle(nodes, [*running, big], WITH_BACKFILL, now=59)
    late = cycle(nodes, [*running, big], WITH_BACKFILL, now=60)

    assert early.reservations == ()
    assert [r.job for r in late.reservations] == ["big"]


def test_queue_starvation_threshold_applies_to_its_jobs() -> None:
    nodes = make_nodes(1)
    queues = [make_queue("q", starvation=20)]
    running = [make_job("r0", queue="q", gpus=8, running_on=["n0"], walltime=100)]
    big = make_job("big", queue="q", gpus=8, created=0)

    decisions = cycle(nodes, [*running, big], WITH_BACKFILL, queues=queues, now=25)

    assert [(r.job, r.start_time) for r in decisions.reservations] == [("big", 100.0)]


def test_sla_waiting_time_applies_to_jobs_without_their_own_threshold() -> None:
    cfg = config(
        ["allocate", "backfill"], ["priority", "gang", ("sla", {"waitingTime": 40})], TIER2
    )
    running = [make_job("r0", gpus=8, running_on=["n0"], walltime=100)]
    jobs = [
        make_job("plain", gpus=8, created=0),
        make_job("patient", gpus=8, created=0, starvation=500),  # its own threshold wins
    ]

    early = cycle(make_nodes(1), [*running, *jobs], cfg, now=39)
    late = cycle(make_nodes(1), [*running, *jobs], cfg, now=40)

    assert early.reservations == ()
    assert [r.job for r in late.reservations] == ["plain"]


def test_a_job_evicted_and_pending_again_starves_from_when_it_became_pending() -> None:
    running = [make_job("r0", gpus=8, running_on=["n0"], walltime=100)]
    requeued = make_job("requeued", gpus=8, created=0, starvation=30, pending_since=50)

    assert cycle(make_nodes(1), [*running, requeued], WITH_BACKFILL, now=70).reservations == ()
    late = cycle(make_nodes(1), [*running, requeued], WITH_BACKFILL, now=80)
    assert [r.job for r in late.reservations] == ["requeued"]
