"""Gang scheduling: a job runs only when minAvailable tasks run together.

The classic deadlock: two gangs that each need every GPU of the cluster. Without gang
scheduling each grabs part of the cluster as GPUs free up and neither can ever start;
with it exactly one gang is placed whole and the other waits with nothing held.
"""

from __future__ import annotations

from phalanx.domain.job import Job
from phalanx.engine import ReasonCode, SchedulerConfig
from tests.builders import bound, config, cycle, make_job, make_nodes, make_queue
from tests.scenarios.world import World

GANG = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "binpack"])
NO_GANG = config(["allocate"], ["priority"], ["drf", "predicates", "binpack"])


def _two_gangs() -> list[Job]:
    # each gang: 4 tasks x 4 GPUs = both nodes' 16 GPUs
    return [
        make_job("gang-a", gpus=4, replicas=4, created=1),
        make_job("gang-b", gpus=4, replicas=4, created=2),
    ]


def _draining_cluster(cfg: SchedulerConfig) -> World:
    """Two 8-GPU nodes full of 4-GPU fillers that end at t=10, 20, 30 and 40."""
    world = World(nodes=make_nodes(2), queues=[make_queue()], config=cfg)
    for i, end in enumerate((10, 20, 30, 40)):
        world.submit(make_job(f"filler{i}", gpus=4, running_on=[f"n{i // 2}"], walltime=end))
    world.submit(*_two_gangs())
    return world


def test_two_gangs_on_an_idle_cluster_one_is_placed_whole_the_other_gets_nothing() -> None:
    decisions = cycle(make_nodes(2), _two_gangs(), GANG)

    assert bound(decisions, "gang-a") == ["n0", "n0", "n1", "n1"]
    assert bound(decisions, "gang-b") == []
    reason = decisions.reason_for("gang-b")
    assert reason is not None
    assert reason.resource == "gpu"
    assert "4 GPUs" in reason.message


def test_gang_deadlock_is_prevented_as_gpus_free_up_one_by_one() -> None:
    world = _draining_cluster(GANG)

    for t in (0, 10, 20, 30):
        decisions = world.step(t)
        assert decisions.binds == ()  # partial room is never handed to part of a gang
    at_30 = world.history[-1][1]
    for name in ("gang-a", "gang-b"):
        reason = at_30.reason_for(name)
        assert reason is not None and reason.code is ReasonCode.GANG
        assert "gang needs 4 tasks together but only 3 fit" in reason.message

    decisions = world.step(40)

    assert bound(decisions, "gang-a") == ["n0", "n0", "n1", "n1"]
    assert bound(decisions, "gang-b") == []
    assert world.placed("gang-b") == []
    world.step(50)
    assert len(world.placed("gang-a")) == 4


def test_without_the_gang_plugin_both_gangs_hold_part_of_the_cluster_forever() -> None:
    world = _draining_cluster(NO_GANG)

    world.run([0, 10, 20, 30, 40, 50, 1000])

    # each holds two of its four tasks, all 16 GPUs are taken, neither can ever complete
    assert sorted(world.placed("gang-a")) == ["n0", "n1"]
    assert sorted(world.placed("gang-b")) == ["n0", "n1"]
    assert world.used("default") == 16
    assert world.step(2000).binds == ()


def test_a_gang_is_bound_only_once_min_available_tasks_fit() -> None:
    # 3 replicas, 2 needed together; only two 8-GPU nodes: two tasks run, the third waits
    job = make_job("elastic", gpus=8, replicas=3, min_available=2)

    decisions = cycle(make_nodes(2), [job], GANG)

    assert bound(decisions, "elastic") == ["n0", "n1"]
    assert decisions.reason_for("elastic") is None


def test_a_gang_larger_than_its_tasks_is_invalid_and_says_how_to_fix_it() -> None:
    job = make_job("broken", gpus=1, replicas=2, min_available=3)

    decisions = cycle(make_nodes(2), [job], GANG)

    assert decisions.binds == ()
    reason = decisions.reason_for("broken")
    assert reason is not None and reason.code is ReasonCode.INVALID
    assert "minAvailable is 3" in reason.message and "fix:" in reason.message
