"""The one lifecycle on its own: rules the drivers' tests do not reach directly."""

from __future__ import annotations

import pytest

from phalanx.domain.job import JobPhase
from phalanx.engine import default_config
from phalanx.engine.decisions import Decisions
from phalanx.engine.lifecycle import (
    STAGES,
    Event,
    EventKind,
    JobChanged,
    Lifecycle,
    RetryPolicy,
    Start,
    Stop,
    TaskEvent,
    TaskEventKind,
    parts_by_job,
)
from phalanx.engine.lifecycle.effects import Effect
from phalanx.engine.state import ClusterState
from tests.builders import make_job, make_nodes, make_queue


def _running(*, replicas: int = 2) -> tuple[Lifecycle, list[str]]:
    """A lifecycle with job ``j`` placed and every task started; its task names."""
    life = Lifecycle(ClusterState(make_nodes(2), [make_queue()]))
    life.submit(make_job("j", replicas=replicas, phase=JobPhase.PENDING), now=0.0)
    effects = life.apply(life.state.cycle(default_config(), now=1.0), now=1.0)
    (start,) = [e for e in effects if isinstance(e, Start)]
    for bind in start.binds:
        life.on_event(_event(TaskEventKind.STARTED, bind.task), now=1.0)
    return life, [b.task for b in start.binds]


def _event(kind: TaskEventKind, task: str, **fields: object) -> TaskEvent:
    return TaskEvent(kind=kind, time=1.0, job="j", task=task, node="n0", **fields)  # type: ignore[arg-type]


def _phases(effects: list[Effect]) -> list[JobPhase]:
    return [e.phase for e in effects if isinstance(e, JobChanged)]


def test_the_backoff_doubles_from_its_first_value_up_to_its_cap() -> None:
    policy = RetryPolicy(backoff=10.0, max_backoff=300.0)
    assert [policy.delay(n) for n in (1, 2, 3, 5, 6, 1000)] == [10, 20, 40, 160, 300, 300]


def test_a_task_lost_while_it_was_being_stopped_costs_no_retry() -> None:
    life, tasks = _running()
    effects = life.drain("n0", now=2.0) + life.drain("n1", now=2.0)
    assert {e.action for s in effects if isinstance(s, Stop) for e in s.evictions} == {"drain"}
    life.on_event(_event(TaskEventKind.LOST, tasks[0]), now=3.0)
    effects = life.on_event(
        _event(TaskEventKind.EXITED, tasks[1], exit_code=143, stopped=True), now=3.0
    )
    assert _phases(effects) == [JobPhase.PENDING]
    assert life.jobs["j"].attempts == 0 and life.jobs["j"].not_before is None


def test_a_drain_that_breaks_a_gang_stops_the_rest_of_it() -> None:
    life, tasks = _running()
    nodes = {t.name: life.state.snapshot.nodes[t.node].name for t in life.tasks(life.jobs["j"])}
    effects = life.drain(nodes[tasks[0]], now=2.0)
    stopped = sorted(e.task for s in effects if isinstance(s, Stop) for e in s.evictions)
    assert stopped == sorted(tasks)  # one on the drained node, the other for the gang
    assert [e.kind for e in effects if isinstance(e, Event)] == [EventKind.EVICTED] * (
        1 if len(set(nodes.values())) == 1 else 2
    )


def test_abort_fails_a_job_that_never_got_into_the_engine() -> None:
    life = Lifecycle(ClusterState(make_nodes(1), [make_queue()]))
    life.submit(make_job("j", queue="missing", phase=JobPhase.PENDING), now=0.0)
    effects = life.abort("j", "something broke", now=1.0)
    assert [(e.phase, e.reason) for e in effects if isinstance(e, JobChanged)] == [
        (JobPhase.FAILED, "Aborted")
    ]
    assert "j" not in life.jobs


def test_drop_forgets_a_job_and_stops_what_it_runs() -> None:
    life, tasks = _running()
    effects = life.drop("j", "the books are broken")
    assert [type(e) for e in effects] == [Stop, JobChanged, Event]
    assert sorted(e.task for e in effects[0].evictions) == sorted(tasks)  # type: ignore[union-attr]
    assert "j" not in life.jobs and "j" not in life.state.snapshot.jobs


@pytest.mark.parametrize("kind", [TaskEventKind.LOST, TaskEventKind.FAILED_TO_START])
def test_a_lost_or_unstartable_task_fails_the_attempt_with_its_reason(kind: TaskEventKind) -> None:
    life, tasks = _running()
    effects = life.on_event(_event(kind, tasks[0], message="no such file"), now=2.0)
    (failed,) = [e for e in effects if isinstance(e, Event) and e.kind is EventKind.TASK_FAILED]
    assert failed.tasks == (tasks[0],)
    expected = "was lost with its node n0" if kind is TaskEventKind.LOST else "could not start"
    assert expected in failed.message and "retry 1 of 3" in failed.message


def test_a_task_lost_or_unstartable_while_it_is_stopped_ends_as_a_stopped_task() -> None:
    life, tasks = _running()
    life.cancel("j", "cancelled by request", now=2.0)
    life.on_event(_event(TaskEventKind.LOST, tasks[0]), now=3.0)
    effects = life.on_event(_event(TaskEventKind.FAILED_TO_START, tasks[1], message="x"), now=3.0)
    assert _phases(effects) == [JobPhase.CANCELLED]
    assert not [e for e in effects if isinstance(e, Event) and e.kind is EventKind.TASK_FAILED]


def _settled(life: Lifecycle, tasks: list[str], *, now: float) -> list[Effect]:
    """The other task of the gang reports its stop: the attempt settles."""
    return life.on_event(
        _event(TaskEventKind.EXITED, tasks[1], exit_code=143, stopped=True), now=now
    )


def test_a_start_no_retry_can_fix_fails_the_job_at_once() -> None:
    life, tasks = _running()
    effects = life.on_event(
        _event(TaskEventKind.FAILED_TO_START, tasks[0], message="no python", retriable=False),
        now=2.0,
    )
    effects += _settled(life, tasks, now=2.0)
    assert [(e.phase, e.reason) for e in effects if isinstance(e, JobChanged)] == [
        (JobPhase.FAILED, "RetriesExhausted")
    ]
    (failed,) = [e for e in effects if isinstance(e, Event) and e.kind is EventKind.TASK_FAILED]
    assert "no python; not retried: a retry cannot fix this" in failed.message


def test_a_gang_whose_node_was_lost_restarts_without_the_backoff() -> None:
    life, tasks = _running()
    effects = life.on_event(_event(TaskEventKind.LOST, tasks[0]), now=2.0)
    effects += _settled(life, tasks, now=2.0)
    assert [(e.phase, e.message) for e in effects if isinstance(e, JobChanged)] == [
        (
            JobPhase.PENDING,
            "task j-worker-0 was lost with its node n0; retry 1 of 3 at once (the node "
            "failed, not the job)",
        )
    ]
    job = life.jobs["j"]
    assert job.attempts == 1 and job.not_before is None  # a retry spent, no wait


def test_a_failed_task_still_waits_its_backoff() -> None:
    life, tasks = _running()
    life.on_event(_event(TaskEventKind.EXITED, tasks[0], exit_code=1), now=2.0)
    _settled(life, tasks, now=2.0)
    assert life.jobs["j"].not_before == 2.0 + RetryPolicy().delay(1)


def test_a_sessions_parts_by_job_applied_in_turn_record_what_the_whole_does() -> None:
    """Low-priority jobs run; a high-priority one arrives and preempts: one session
    that admits, evicts, binds and leaves jobs waiting. The controller applies it a
    job's part at a time (``parts_by_job``); the simulator applies it whole."""

    def lifecycle() -> tuple[Lifecycle, Decisions]:
        life = Lifecycle(ClusterState(make_nodes(2), [make_queue()]))
        for n in range(4):
            life.submit(make_job(f"low{n}", gpus=4, phase=JobPhase.PENDING), now=0.0)
        for start in life.apply(life.state.cycle(default_config(), now=1.0), now=1.0):
            for bind in start.binds if isinstance(start, Start) else ():
                started = TaskEvent(
                    kind=TaskEventKind.STARTED,
                    time=1.0,
                    job=bind.job,
                    task=bind.task,
                    node=bind.node,
                )
                life.on_event(started, now=1.0)
        life.submit(make_job("high", gpus=4, priority=10, phase=JobPhase.PENDING), now=2.0)
        life.submit(make_job("wide", gpus=8, replicas=4, phase=JobPhase.PENDING), now=2.0)
        return life, life.state.cycle(default_config(), now=3.0)

    whole, decisions = lifecycle()
    parted, same = lifecycle()
    assert same == decisions
    assert decisions.evictions and decisions.unschedulable  # the stages this is about
    parts = parts_by_job(decisions)
    stages = [next(s for s in STAGES if getattr(part, s)) for _, part in parts]
    assert stages == sorted(stages, key=STAGES.index)  # stage by stage
    expected = whole.apply(decisions, now=3.0)
    assert [e for _, part in parts for e in parted.apply(part, now=3.0)] == expected
    assert {n: (j.phase, j.reason) for n, j in parted.jobs.items()} == {
        n: (j.phase, j.reason) for n, j in whole.jobs.items()
    }
