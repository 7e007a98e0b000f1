"""A task that is lost or cannot start fails, and its job retries or fails by its rules.

The controller's lifecycle is driven here without a database or processes: a fake
executor records what it is asked, the journal keeps its events in memory, and time is
set by hand. Every phase change goes through the transition table, so a forbidden edge
(Bound -> Pending, the old answer to a lost task) raises ``IllegalTransition``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from phalanx.control.controllers import adoption, decide, lifecycle
from phalanx.control.controllers.core import Core, Timing
from phalanx.control.controllers.journal import Journal
from phalanx.control.controllers.rebuild import new_state
from phalanx.control.controllers.tracked import Tracked
from phalanx.domain.job import JobPhase
from phalanx.engine.decisions import Bind, Evict
from phalanx.engine.snapshot import TaskStatus
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.policies import load_policy
from tests.builders import make_job, make_node, make_queue


class RecordingJournal(Journal):
    """A journal that also keeps every event, to be read by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self.jobs: dict[int, dict[str, object]] = {}

    def event(self, job_id: int, time: float, kind: str, message: str) -> None:
        super().event(job_id, time, kind, message)
        self.events.append((kind, message))

    def job(self, job_id: int, **values: object) -> None:
        super().job(job_id, **values)
        self.jobs.setdefault(job_id, {}).update(values)


class FakeExecutor:
    """Records start and stop requests; reports nothing by itself."""

    def __init__(self) -> None:
        self.started: list[Bind] = []
        self.stopped: list[Evict] = []

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        self.started.extend(binds)

    def stop(self, evictions: Sequence[Evict], *, now: float, grace: float) -> None:
        self.stopped.extend(evictions)

    def poll(self, *, now: float) -> list[TaskEvent]:
        return []


def placed(replicas: int = 2, max_retry: int = 1) -> tuple[Core, Tracked, FakeExecutor]:
    """A controller core with job ``j`` placed (its tasks Bound) and its starts sent."""
    executor = FakeExecutor()
    core = Core(
        new_state([make_node("n0", gpus=0)], [make_queue("default")], {}),
        executor,
        Timing(backoff=10.0),
    )
    core.journal = RecordingJournal()
    core.now = 100.0
    job = replace(
        make_job("j", replicas=replicas, gpus=0, phase=JobPhase.PENDING), max_retry=max_retry
    )
    tracked = Tracked(id=1, job=job, phase=JobPhase.PENDING, task_ids={})
    core.jobs["j"] = tracked
    info = core.state.add_job(job)
    assert info is not None
    tracked.in_state = True
    tracked.task_ids = {task.name: i for i, task in enumerate(info.tasks)}
    decide.apply(core, core.state.cycle(load_policy("phalanx-default").config, now=core.now))
    core.dispatch()
    assert [t.status for t in core.tasks(tracked)] == [TaskStatus.BOUND] * replicas
    assert len(executor.started) == replicas
    return core, tracked, executor


def event(
    kind: TaskEventKind,
    task: str,
    *,
    exit_code: int | None = None,
    stopped: bool = False,
    message: str = "",
) -> TaskEvent:
    return TaskEvent(
        kind=kind,
        time=100.0,
        job="j",
        task=task,
        node="n0",
        exit_code=exit_code,
        stopped=stopped,
        message=message,
    )


def journal(core: Core) -> RecordingJournal:
    assert isinstance(core.journal, RecordingJournal)
    return core.journal


def test_a_bound_task_that_cannot_start_fails_and_its_gang_retries_after_a_backoff() -> None:
    core, job, executor = placed(max_retry=1)
    unstartable = "the task's environment is too big: pass large values in a file"
    lifecycle.on_event(
        core, event(TaskEventKind.FAILED_TO_START, "j-worker-0", message=unstartable)
    )
    statuses = [t.status for t in core.tasks(job)]
    assert statuses == [TaskStatus.FAILED, TaskStatus.RELEASING]  # the gang is stopped
    core.dispatch()
    assert [e.task for e in executor.stopped] == ["j-worker-1"]
    lifecycle.on_event(core, event(TaskEventKind.EXITED, "j-worker-1", exit_code=143, stopped=True))
    assert job.phase is JobPhase.PENDING and job.attempts == 1
    assert job.not_before == 110.0 and not job.in_state  # waits out its backoff
    kind, message = journal(core).events[-2]
    assert kind == "TaskFailed"
    assert message == f"task j-worker-0 could not start: {unstartable}; retry 1 of 1"
    assert journal(core).jobs[1]["message"] == message


def test_out_of_retries_a_task_that_cannot_start_fails_its_job_with_the_reason() -> None:
    core, job, _ = placed(replicas=1, max_retry=0)
    lifecycle.on_event(core, event(TaskEventKind.FAILED_TO_START, "j-worker-0", message="E2BIG"))
    assert job.phase is JobPhase.FAILED and "j" not in core.jobs
    row = journal(core).jobs[1]
    assert row["reason"] == "RetriesExhausted"
    assert row["message"] == "task j-worker-0 could not start: E2BIG; no retries left (maxRetry 0)"


def test_a_running_task_that_is_lost_fails_and_its_gang_retries() -> None:
    core, job, _ = placed(max_retry=2)
    for task in ("j-worker-0", "j-worker-1"):
        lifecycle.on_event(core, event(TaskEventKind.STARTED, task))
    assert job.phase is JobPhase.RUNNING
    lifecycle.on_event(core, event(TaskEventKind.LOST, "j-worker-1"))
    assert [t.status for t in core.tasks(job)] == [TaskStatus.RELEASING, TaskStatus.FAILED]
    lifecycle.on_event(core, event(TaskEventKind.EXITED, "j-worker-0", exit_code=143, stopped=True))
    assert job.phase is JobPhase.PENDING and job.attempts == 1
    assert ("TaskFailed", "task j-worker-1 was lost with its node n0; retry 1 of 2") in journal(
        core
    ).events


def test_a_task_lost_while_it_is_stopped_ends_as_a_stopped_task() -> None:
    core, job, _ = placed()
    lifecycle.cancel(core, job, "cancelled by request")
    assert [t.status for t in core.tasks(job)] == [TaskStatus.RELEASING] * 2
    lifecycle.on_event(core, event(TaskEventKind.LOST, "j-worker-0"))
    lifecycle.on_event(core, event(TaskEventKind.FAILED_TO_START, "j-worker-1", message="x"))
    assert job.phase is JobPhase.CANCELLED and job.attempts == 0  # no retry spent


def test_at_start_up_a_bound_task_without_a_process_record_is_lost_with_the_reason() -> None:
    core, job, _ = placed(max_retry=1)
    adoption.lose_unrecorded(core, recorded=set())  # as after kill -9 before any record
    assert job.phase is JobPhase.PENDING and job.attempts == 1
    failed = [message for kind, message in journal(core).events if kind == "TaskFailed"]
    assert failed == [
        f"task j-worker-0 was lost with its node n0: {adoption.UNRECORDED}; retry 1 of 1"
    ]
