"""fairshare: a multifactor priority that remembers who used the queue.

Usage is banked by the engine's state as tasks leave their nodes and decays with the
plugin's half-life; each job's factors (age, fair-share, size, priority class) are
weighted and summed, highest first, as Slurm's priority/multifactor does.
"""

from __future__ import annotations

from phalanx.domain.job import TaskPhase
from phalanx.engine.plugins.fairshare import FairsharePlugin, Multifactor
from phalanx.engine.snapshot import Snapshot
from phalanx.engine.state import ClusterState
from tests.builders import config, make_job, make_nodes, make_queue

HOUR, DAY = 3600.0, 86400.0
FAIRSHARE = config(
    ["allocate"],
    ["gang", ("fairshare", {"halfLife": DAY, "maxAge": DAY})],
    ["predicates", "binpack"],
)


def heavy_history(state: ClusterState, *, hours: float) -> None:
    """``heavy`` ran 8 GPUs for ``hours`` hours, ending at t = 0."""
    info = state.add_job(make_job("history", gpus=8, user="heavy", created=-hours * HOUR))
    assert info is not None
    (task,) = info.tasks
    state.set_task(task, TaskPhase.BOUND, "n0", start_time=-hours * HOUR)
    state.set_task(task, TaskPhase.SUCCEEDED, now=0.0)
    state.remove_job("history")


def two_waiting(state: ClusterState, *, at: float) -> None:
    """One 8-GPU job each from ``heavy``, submitted at ``at``, and ``light``, an hour later."""
    for name, user, created in (("heavy-next", "heavy", at), ("light-next", "light", at + HOUR)):
        assert state.add_job(make_job(name, gpus=8, user=user, created=created)) is not None


def first_bound(state: ClusterState, now: float) -> str:
    decisions = state.cycle(FAIRSHARE, now=now)
    return decisions.binds[0].job


def view(state: ClusterState, now: float) -> Multifactor:
    return Multifactor(FairsharePlugin(FAIRSHARE.tiers[0][1].args), state.snapshot, now)


def test_a_heavy_users_new_job_waits_behind_a_light_users() -> None:
    state = ClusterState(make_nodes(1), [make_queue()])
    heavy_history(state, hours=10)
    two_waiting(state, at=60.0)

    now = 2 * HOUR
    assert first_bound(state, now) == "light-next"  # heavy's came an hour earlier
    seen = view(state, now)
    heavy, light = (seen.factors(state.job(n)) for n in ("heavy-next", "light-next"))
    # heavy has all the queue's usage, with two active users: 2 ** (-1 * 2)
    assert heavy.fair_share == 0.25 and light.fair_share == 1.0
    assert heavy.age > light.age and heavy.total < light.total


def test_without_history_submission_order_stands() -> None:
    state = ClusterState(make_nodes(1), [make_queue()])
    two_waiting(state, at=60.0)
    assert first_bound(state, now=2 * HOUR) == "heavy-next"


def test_the_half_life_brings_them_level_again() -> None:
    """After heavy's burst both users run alike (4 GPUs each, from t = 0): an hour on,
    the burst still weighs and light goes first; ten half-lives on, it counts 2 ** -10 of
    what it did, the two are level, and submission order (heavy's an hour earlier) wins."""
    state = ClusterState(make_nodes(2), [make_queue()], half_life=DAY)
    heavy_history(state, hours=10)
    for user in ("heavy", "light"):
        steady = make_job(f"{user}-steady", gpus=4, user=user, running_on=["n1"], started=0.0)
        assert state.add_job(steady) is not None
    two_waiting(state, at=0.0)
    assert first_bound(state, now=HOUR) == "light-next"

    for name in ("heavy-next", "light-next"):
        state.remove_job(name)
    two_waiting(state, at=10 * DAY - 2 * HOUR)
    later = view(state, 10 * DAY)
    heavy, light = (later.factors(state.job(n)) for n in ("heavy-next", "light-next"))
    assert abs(heavy.fair_share - light.fair_share) < 0.001
    assert first_bound(state, now=10 * DAY) == "heavy-next"


def test_age_lifts_a_starving_job() -> None:
    """A heavy user's job that waited a whole ``maxAge`` outranks a light user's new one."""
    state = ClusterState(make_nodes(1), [make_queue()])
    heavy_history(state, hours=10)
    assert state.add_job(make_job("starving", gpus=8, user="heavy", created=60.0)) is not None
    assert state.add_job(make_job("fresh", gpus=8, user="light", created=DAY)) is not None

    assert first_bound(state, now=DAY + 60) == "starving"
    early = ClusterState(make_nodes(1), [make_queue()])
    heavy_history(early, hours=10)
    assert early.add_job(make_job("waited-little", gpus=8, user="heavy", created=60.0))
    assert early.add_job(make_job("fresh", gpus=8, user="light", created=120.0))
    assert first_bound(early, now=180.0) == "fresh"


def test_the_factors_are_what_a_fresh_snapshot_of_the_same_usage_gives() -> None:
    """Usage lives in the snapshot (``Snapshot.usage``): one built anew and given the same
    book orders alike (what the control plane relies on when it re-reads its ledger)."""
    state = ClusterState(make_nodes(1), [make_queue()])
    heavy_history(state, hours=3)
    two_waiting(state, at=60.0)
    fresh = Snapshot.build(
        nodes=make_nodes(1),
        queues=[make_queue()],
        jobs=[
            make_job("heavy-next", gpus=8, user="heavy", created=60.0),
            make_job("light-next", gpus=8, user="light", created=60.0 + HOUR),
        ],
    )
    fresh.usage = state.snapshot.usage
    ours = Multifactor(FairsharePlugin(), state.snapshot, 2 * HOUR)
    theirs = Multifactor(FairsharePlugin(), fresh, 2 * HOUR)
    for name in ("heavy-next", "light-next"):
        assert ours.factors(state.job(name)) == theirs.factors(fresh.jobs[name])
