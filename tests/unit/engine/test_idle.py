"""Idle GPUs in the one lifecycle: the watch's spells (reset by a busy reading, broken by
stale data, judged once), and what ``act_on`` and ``Lifecycle.stop_idle`` make of a
verdict: a mark, a stop (Failed, not retried), or an elastic job shrunk to its minimum
and stopped there."""

from __future__ import annotations

from phalanx.domain.job import Elastic, Job, JobPhase, Role
from phalanx.domain.queue import IdleAction, IdlePolicy
from phalanx.engine import default_config
from phalanx.engine.lifecycle import (
    Effect,
    Event,
    EventKind,
    IdleVerdict,
    IdleWatch,
    JobChanged,
    Lifecycle,
    Resized,
    Start,
    Stop,
    TaskEvent,
    TaskEventKind,
    act_on,
)
from phalanx.engine.lifecycle.idle import STALE
from phalanx.engine.lifecycle.jobs import FOR_GOOD, Ending
from phalanx.engine.lifecycle.reducer import _SETTLED
from phalanx.engine.snapshot import ON_NODE
from phalanx.engine.state import ClusterState
from tests.builders import make_job, make_nodes, make_queue, res

MARK = IdlePolicy(threshold=5.0, window=1800.0, action=IdleAction.MARK, queue="nlp")
STOP = IdlePolicy(threshold=5.0, window=1800.0, action=IdleAction.STOP, queue="nlp")


def _read(
    watch: IdleWatch,
    job: str,
    utilisation: float,
    start: float,
    end: float,
    policy: IdlePolicy = MARK,
) -> None:
    """Readings every 5 s from ``start`` to ``end`` (both included)."""
    at = start
    while at <= end:
        watch.observe(job, utilisation, at, policy)
        at += 5.0


# -- the watch --------------------------------------------------------------------------


def test_a_job_below_the_threshold_for_the_window_gets_one_verdict() -> None:
    watch = IdleWatch()
    _read(watch, "j", 2.0, 0.0, 1795.0)
    assert watch.verdicts(1795.0) == [] and watch.idle_since("j") is None

    watch.observe("j", 4.9, 1800.0, MARK)
    (verdict,) = watch.verdicts(1800.0)

    assert verdict == IdleVerdict(
        job="j",
        action=IdleAction.MARK,
        since=0.0,
        message="its GPUs were below 5% utilisation for 30m (queue nlp's idleGpus)",
    )
    assert watch.idle_since("j") == 0.0
    watch.observe("j", 1.0, 1805.0, MARK)
    assert watch.verdicts(1805.0) == []  # once per spell


def test_a_busy_reading_ends_the_spell_and_a_new_one_is_judged_anew() -> None:
    watch = IdleWatch()
    _read(watch, "j", 0.0, 0.0, 1800.0)
    assert len(watch.verdicts(1800.0)) == 1
    watch.observe("j", 5.0, 1805.0, MARK)  # at the threshold is busy
    assert watch.idle_since("j") is None

    _read(watch, "j", 0.0, 1810.0, 3605.0)
    assert watch.verdicts(3605.0) == []  # 1795 s of the new spell
    watch.observe("j", 0.0, 3610.0, MARK)
    (verdict,) = watch.verdicts(3610.0)
    assert verdict.since == 1810.0


def test_a_busy_reading_of_another_node_counts_even_late() -> None:
    watch = IdleWatch()
    _read(watch, "j", 0.0, 0.0, 1000.0)
    watch.observe("j", 90.0, 990.0, MARK)  # another node's task is busy, read late
    _read(watch, "j", 0.0, 1005.0, 1800.0)

    assert watch.verdicts(1800.0) == []


def test_old_readings_judge_nothing() -> None:
    watch = IdleWatch()
    _read(watch, "j", 0.0, 0.0, 1800.0)
    assert watch.verdicts(1800.0 + STALE + 1.0) == []  # read too long ago: dropped
    assert watch.watched() == []

    _read(watch, "k", 0.0, 0.0, 900.0)
    _read(watch, "k", 0.0, 1000.0, 1800.0)  # a gap of 100 s: the spell starts anew at 1000
    assert watch.verdicts(1800.0) == []
    _read(watch, "k", 0.0, 1805.0, 2800.0)
    assert [v.since for v in watch.verdicts(2800.0)] == [1000.0]


def test_a_change_of_policy_starts_the_spell_anew_and_zero_judges_nothing() -> None:
    watch = IdleWatch()
    _read(watch, "j", 0.0, 0.0, 900.0)
    exempt = IdlePolicy(threshold=0.0, window=60.0)
    for at in range(905, 2000, 5):
        watch.observe("j", 0.0, float(at), exempt)
    assert watch.verdicts(1995.0) == []


def test_verdicts_are_sorted_by_job_and_forget_drops_a_job() -> None:
    watch = IdleWatch()
    for job in ("b", "c", "a"):
        _read(watch, job, 0.0, 0.0, 1800.0)
    watch.forget("c")

    assert [v.job for v in watch.verdicts(1800.0)] == ["a", "b"]


# -- the lifecycle ----------------------------------------------------------------------


class Cluster:
    """A lifecycle on two 8-GPU nodes, driven as a driver does: every start reported
    started, every stop reported exited."""

    def __init__(self) -> None:
        self.life = Lifecycle(ClusterState(make_nodes(2), [make_queue()]))
        self.effects: list[Effect] = []

    def run(self, job: Job, *, now: float = 1.0) -> None:
        self._carry_out(self.life.submit(job, now=0.0), now)
        self._carry_out(
            self.life.apply(self.life.state.cycle(default_config(), now=now), now=now), now
        )

    def act(self, watch: IdleWatch, verdicts: list[IdleVerdict], *, now: float) -> list[Effect]:
        before = len(self.effects)
        self._carry_out(act_on(self.life, watch, verdicts, now=now), now)
        return self.effects[before:]

    def placed(self, job: str) -> int:
        life = self.life.jobs[job]
        return sum(t.status in ON_NODE for t in self.life.tasks(life))

    def _carry_out(self, effects: list[Effect], now: float) -> None:
        self.effects += effects
        for effect in effects:
            reports: list[TaskEvent] = []
            if isinstance(effect, Start):
                reports = [
                    TaskEvent(
                        kind=TaskEventKind.STARTED, time=now, job=b.job, task=b.task, node=b.node
                    )
                    for b in effect.binds
                ]
            elif isinstance(effect, Stop):
                reports = [
                    TaskEvent(
                        kind=TaskEventKind.EXITED,
                        time=now,
                        job=e.job,
                        task=e.task,
                        node=e.node,
                        exit_code=143,
                        stopped=True,
                    )
                    for e in effect.evictions
                ]
            for report in reports:
                self._carry_out(self.life.on_event(report, now=now), now)


def _verdict(job: str, action: IdleAction) -> IdleVerdict:
    return IdleVerdict(job=job, action=action, since=0.0, message="its GPUs were idle")


def _idle_events(effects: list[Effect]) -> list[str]:
    return [e.message for e in effects if isinstance(e, Event) and e.kind is EventKind.IDLE]


def test_mark_says_an_event_and_changes_nothing() -> None:
    cluster = Cluster()
    cluster.run(make_job("j", replicas=2, phase=JobPhase.PENDING))

    effects = cluster.act(IdleWatch(), [_verdict("j", IdleAction.MARK)], now=2000.0)

    assert [type(e) for e in effects] == [Event]
    assert _idle_events(effects) == [
        "its GPUs were idle: marked idle; fix: put its GPUs to work, or end it to free them "
        "for others"
    ]
    assert cluster.life.jobs["j"].phase is JobPhase.RUNNING and cluster.placed("j") == 2


def test_stop_fails_a_job_for_good_without_a_retry() -> None:
    cluster = Cluster()
    cluster.run(make_job("j", replicas=2, phase=JobPhase.PENDING))
    watch = IdleWatch()
    _read(watch, "j", 0.0, 0.0, 10.0)

    effects = cluster.act(watch, [_verdict("j", IdleAction.STOP)], now=2000.0)

    assert {e.action for s in effects if isinstance(s, Stop) for e in s.evictions} == {"idle"}
    (failed,) = [e for e in effects if isinstance(e, JobChanged)]
    assert (failed.phase, failed.reason, failed.message) == (
        JobPhase.FAILED,
        "IdleGpus",
        "its GPUs were idle: stopped",
    )
    assert _idle_events(effects) == ["its GPUs were idle: stopped"]
    assert "j" not in cluster.life.jobs  # not Pending again: no retry, though maxRetry is 3
    assert watch.watched() == []


def test_an_elastic_job_is_shrunk_to_its_minimum_then_stopped_there() -> None:
    role = Role(
        name="worker",
        replicas=4,
        resources=res(1, 1, 1),
        elastic=Elastic(min_replicas=1, max_replicas=8, interval=1e9),
    )
    cluster = Cluster()
    cluster.run(Job(name="e", queue="default", roles=(role,), user="u"))
    assert cluster.placed("e") == 4
    watch = IdleWatch()
    _read(watch, "e", 0.0, 0.0, 1800.0, STOP)

    shrunk = cluster.act(watch, watch.verdicts(1800.0), now=1800.0)

    assert [e.size for e in shrunk if isinstance(e, Resized)][-1] == 1  # one leaves at a time
    assert _idle_events(shrunk) == [
        "its GPUs were below 5% utilisation for 30m (queue nlp's idleGpus): shrunk to its "
        "minimum of 1"
    ]
    life = cluster.life.jobs["e"]
    assert life.phase is JobPhase.RUNNING and life.attempts == 0 and cluster.placed("e") == 1
    assert watch.idle_since("e") is None  # watched anew, at its minimum, from the shrink
    _read(watch, "e", 0.0, 1805.0, 3595.0, STOP)
    assert watch.verdicts(3595.0) == []
    watch.observe("e", 0.0, 3600.0, STOP)

    stopped = cluster.act(watch, watch.verdicts(3600.0), now=3600.0)

    assert [(e.phase, e.reason) for e in stopped if isinstance(e, JobChanged)] == [
        (JobPhase.FAILED, "IdleGpus")
    ]
    assert "e" not in cluster.life.jobs


def test_a_job_not_running_is_left_alone() -> None:
    cluster = Cluster()
    cluster.life.submit(make_job("w", gpus=64, phase=JobPhase.PENDING), now=0.0)  # never fits

    assert cluster.life.stop_idle("w", "idle", now=1.0) == []
    assert cluster.life.mark_idle("w", "idle", now=1.0) == []
    assert cluster.life.stop_idle("gone", "idle", now=1.0) == []


def test_every_ending_says_what_the_job_becomes_and_idle_is_for_good() -> None:
    assert set(_SETTLED) == set(Ending)
    assert Ending.IDLE in FOR_GOOD and _SETTLED[Ending.IDLE] == (JobPhase.FAILED, "IdleGpus")
