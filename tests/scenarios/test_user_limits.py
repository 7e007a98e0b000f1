"""Per-user limits inside a queue and budgets per period (the userlimits plugin): each
limit holds a job with a reason naming the user, the queue, the limit and its field;
a user's own limits replace the queue's; a gang that would pass a limit is held whole;
a spent budget holds new jobs or orders them last (and lets within-budget jobs preempt
them); a new period restores it."""

from __future__ import annotations

from dataclasses import replace

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.queue import Budget, Queue, UserLimits, WhenSpent
from phalanx.domain.resources import Resources
from phalanx.engine import Decisions, ReasonCode, SchedulerConfig
from phalanx.engine.framework.config import PluginConfig
from tests.builders import config, make_job, make_nodes, make_queue
from tests.scenarios.world import World

ACTIONS = ["enqueue", "allocate", "preempt"]
TIER2 = ["drf", "predicates", "capacity", "binpack"]
LIMITS = config(ACTIONS, ["userlimits", "priority", "gang"], TIER2)
DAY = 86400.0
HOUR = 3600.0


def _queue(
    *,
    limits: UserLimits | None = None,
    own: dict[str, UserLimits] | None = None,
    budget: Budget | None = None,
) -> Queue:
    return replace(
        make_queue("nlp"),
        limits=limits or UserLimits(),
        user_limits=tuple(sorted((own or {}).items())),
        budget=budget,
    )


def _gpus(count: float) -> Resources:
    return Resources.of({"gpu": count})


def _job(name: str, user: str, *, gpus: float = 4, created: float = 0, **kwargs: object) -> Job:
    return make_job(
        name, queue="nlp", user=user, gpus=gpus, created=created, phase=JobPhase.PENDING, **kwargs
    )  # type: ignore[arg-type]


def _reason(decisions: Decisions, job: str) -> str:
    found = [u.reason for u in decisions.unschedulable if u.job == job]
    assert found, f"{job} is not pending"
    assert found[0].code is ReasonCode.QUEUE_LIMIT
    return found[0].message


def _running(world: World) -> set[str]:
    return {name for name in world.jobs if world.placed(name)}


# -- limits ------------------------------------------------------------------------------


def test_a_resource_limit_holds_the_users_next_job_with_the_limit_named() -> None:
    world = World(make_nodes(4), [_queue(limits=UserLimits(resources=_gpus(8)))], LIMITS)
    world.submit(
        *(_job(f"a{i}", "alice", created=i) for i in range(3)), _job("b0", "bob", created=3)
    )

    decisions = world.step(10)

    assert _running(world) == {"a0", "a1", "b0"}
    said = _reason(decisions, "a2")
    assert "user alice holds 8 GPUs in queue nlp, its limit (limits.resources.gpu 8)" in said
    assert "fix:" in said
    assert world.jobs["a2"].phase is JobPhase.PENDING  # not admitted: it takes no capability


def test_a_held_job_starts_once_the_users_own_job_ends() -> None:
    world = World(make_nodes(4), [_queue(limits=UserLimits(resources=_gpus(8)))], LIMITS)
    world.submit(_job("a0", "alice"), _job("a1", "alice", created=1), runtime=100)
    world.submit(_job("a2", "alice", created=2))

    world.step(10)
    assert _running(world) == {"a0", "a1"}
    world.step(110)
    assert _running(world) == {"a2"}


def test_a_running_jobs_limit_holds_the_next_job_also_within_one_session() -> None:
    world = World(make_nodes(4), [_queue(limits=UserLimits(running_jobs=2))], LIMITS)
    world.submit(*(_job(f"a{i}", "alice", gpus=1, created=i) for i in range(4)))
    world.submit(_job("b0", "bob", gpus=1, created=5))

    decisions = world.step(10)

    assert _running(world) == {"a0", "a1", "b0"}
    assert "user alice runs 2 jobs in queue nlp" in _reason(decisions, "a2")
    assert "its limit (limits.runningJobs 2)" in _reason(decisions, "a3")


def test_the_limit_holds_at_placement_when_enqueue_is_not_configured() -> None:
    cfg = config(["allocate"], ["userlimits", "priority", "gang"], TIER2)
    world = World(make_nodes(4), [_queue(limits=UserLimits(running_jobs=1))], cfg)
    world.submit(_job("a0", "alice", gpus=1), _job("a1", "alice", gpus=1, created=1))

    decisions = world.step(10)

    assert _running(world) == {"a0"}
    assert "user alice runs 1 job in queue nlp, its limit (limits.runningJobs 1)" in _reason(
        decisions, "a1"
    )


def test_a_users_own_limits_replace_the_queues() -> None:
    queue = _queue(
        limits=UserLimits(running_jobs=1, resources=_gpus(4)),
        own={"alice": UserLimits(running_jobs=3)},
    )
    world = World(make_nodes(4), [queue], LIMITS)
    world.submit(*(_job(f"a{i}", "alice", gpus=1, created=i) for i in range(5)))
    world.submit(*(_job(f"b{i}", "bob", gpus=1, created=10 + i) for i in range(2)))

    decisions = world.step(20)

    # alice: 3 jobs (her own runningJobs) and at most 4 GPUs (the queue's, not replaced)
    assert _running(world) == {"a0", "a1", "a2", "b0"}
    assert "its limit (userLimits.alice.runningJobs 3)" in _reason(decisions, "a3")
    assert "its limit (limits.runningJobs 1)" in _reason(decisions, "b1")


def test_a_gang_that_would_pass_the_limit_is_held_whole() -> None:
    world = World(make_nodes(4), [_queue(limits=UserLimits(resources=_gpus(8)))], LIMITS)
    world.submit(_job("a0", "alice"))
    world.step(10)
    world.submit(_job("gang", "alice", gpus=2, replicas=4, created=11))

    decisions = world.step(20)

    assert world.placed("gang") == []  # none of its 4 tasks, though 2 would fit the limit
    assert "user alice holds 4 GPUs in queue nlp" in _reason(decisions, "gang")
    assert "needs 8 GPUs more" in _reason(decisions, "gang")


def test_a_gang_larger_than_the_limit_never_fits_and_says_so() -> None:
    world = World(make_nodes(4), [_queue(limits=UserLimits(resources=_gpus(8)))], LIMITS)
    world.submit(_job("big", "alice", gpus=4, replicas=3))

    said = _reason(world.step(10), "big")

    assert said.startswith("never fits: the job's minimum of 3 tasks needs 12 GPUs")
    assert "limits.resources.gpu 8" in said and "waiting will not help" in said


# -- budgets -----------------------------------------------------------------------------


def _budget(when: WhenSpent, gpu_hours: float = 1) -> Budget:
    return Budget(period=DAY, per_user=_gpus(gpu_hours), when_spent=when)


def test_a_spent_budget_holds_new_jobs_until_the_next_period() -> None:
    world = World(make_nodes(2), [_queue(budget=_budget(WhenSpent.HOLD, 2))], LIMITS)
    world.submit(_job("a0", "alice", gpus=2), runtime=HOUR)  # 2 GPU-hours: all of it
    world.step(0)
    world.submit(_job("a1", "alice", gpus=1, created=2 * HOUR), _job("b0", "bob", created=2 * HOUR))

    decisions = world.step(2 * HOUR)

    assert _running(world) == {"b0"}
    said = _reason(decisions, "a1")
    assert "over budget: user alice used 2 gpu-hours in queue nlp this period" in said
    assert "its budget (budget.perUser.gpu 2)" in said and "restarts in 22h" in said

    world.step(DAY)  # a new period: the budget is whole again
    assert "a1" in _running(world)


def test_a_queue_budget_holds_every_users_jobs() -> None:
    budget = Budget(period=DAY, queue=_gpus(1), when_spent=WhenSpent.HOLD)
    world = World(make_nodes(2), [_queue(budget=budget)], LIMITS)
    world.submit(_job("a0", "alice", gpus=1), runtime=HOUR)
    world.step(0)
    world.submit(_job("b0", "bob", gpus=1, created=HOUR))

    decisions = world.step(HOUR)

    assert "b0" not in _running(world)
    assert "its users used 1 gpu-hours in queue nlp" in _reason(decisions, "b0")
    assert "budget.queue.gpu 1" in _reason(decisions, "b0")


def test_a_cpu_job_runs_when_only_the_gpu_budget_is_spent() -> None:
    world = World(make_nodes(2), [_queue(budget=_budget(WhenSpent.HOLD))], LIMITS)
    world.submit(_job("a0", "alice", gpus=1), runtime=HOUR)
    world.step(0)
    world.submit(_job("cpu", "alice", gpus=0, created=HOUR))

    world.step(HOUR)

    assert _running(world) == {"cpu"}


def _no_priority_preemption() -> SchedulerConfig:
    # without enqueue: its admission counts only lower-priority work as room preemption
    # can make (see the plugin's docstring)
    cfg = config(["allocate", "preempt"], ["userlimits", "priority", "gang"], TIER2)
    first, *rest = cfg.tiers
    tier = tuple(
        PluginConfig(name=p.name, disabled=frozenset({"preemptable"}))
        if p.name == "priority"
        else p
        for p in first
    )
    return replace(cfg, tiers=(tier, *rest))


def test_over_a_lower_priority_budget_jobs_go_after_jobs_within_budget() -> None:
    world = World(make_nodes(1), [_queue(budget=_budget(WhenSpent.LOWER_PRIORITY))], LIMITS)
    world.submit(_job("a0", "alice", gpus=8), runtime=HOUR)
    world.step(0)
    world.submit(
        _job("a1", "alice", gpus=8, created=HOUR, priority=10),
        _job("b0", "bob", gpus=8, created=HOUR + 1),
    )

    decisions = world.step(HOUR + 2)

    assert _running(world) == {"b0"}  # alice is over budget: after bob, her priority aside
    (said,) = [u.reason.message for u in decisions.unschedulable if u.job == "a1"]
    # why it waits (not admitted: no room), and why it is last in line
    assert "over budget: user alice used 8 gpu-hours in queue nlp" in said, said
    assert said.endswith(": after jobs within budget"), said


def test_over_a_lower_priority_budget_jobs_still_run_on_idle_room_and_are_preempted() -> None:
    world = World(
        make_nodes(1), [_queue(budget=_budget(WhenSpent.LOWER_PRIORITY))], _no_priority_preemption()
    )
    world.submit(_job("a0", "alice", gpus=8), runtime=HOUR)
    world.step(0)
    world.submit(_job("a1", "alice", gpus=8, created=HOUR))
    world.step(HOUR)
    assert _running(world) == {"a1"}  # over budget, but nobody else wants the node

    world.submit(_job("b0", "bob", gpus=8, created=HOUR + 10))
    decisions = world.step(HOUR + 10)
    assert [e.job for e in decisions.evictions] == ["a1"]  # same priority: the budget decides
    world.step(HOUR + 11)
    assert _running(world) == {"b0"}


def test_an_over_budget_job_never_preempts_work_within_budget() -> None:
    world = World(
        make_nodes(1), [_queue(budget=_budget(WhenSpent.LOWER_PRIORITY))], _no_priority_preemption()
    )
    world.submit(_job("a0", "alice", gpus=8), runtime=HOUR)
    world.step(0)
    world.submit(_job("b0", "bob", gpus=8, created=HOUR))
    world.step(HOUR)
    world.submit(_job("a1", "alice", gpus=8, created=HOUR + 1, priority=100))

    decisions = world.step(HOUR + 2)

    assert decisions.evictions == () and _running(world) == {"b0"}
