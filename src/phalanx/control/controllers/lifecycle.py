"""Job lifecycle: executor events, failures and retries, cancel, walltime, start order.

Every rule here follows DESIGN.md section 4's transition tables (``Core`` checks each
edge). A failed or lost task restarts its whole gang, up to ``maxRetry`` times, after a
backoff that doubles each time; an eviction that breaks a gang restarts it at once and
costs no retry; walltime and cancel stop the job for good. A role with ``dependsOn``
is placed with its gang but started only once the roles it names are Running.
"""

from __future__ import annotations

from phalanx.control.controllers.core import TERMINAL, Core
from phalanx.control.controllers.tracked import Ending, Tracked
from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.engine.decisions import Bind
from phalanx.engine.snapshot import ON_NODE, TaskInfo, TaskStatus
from phalanx.executors.base import OOM_KILLED, TaskEvent, TaskEventKind

#: What a job becomes when its tasks have stopped for each ending: (phase, reason code).
_SETTLED = {
    Ending.CANCEL: (JobPhase.CANCELLED, "Cancelled"),
    Ending.WALLTIME: (JobPhase.FAILED, "WalltimeExceeded"),
    Ending.FAIL: (JobPhase.FAILED, "RetriesExhausted"),
    Ending.RETRY: (JobPhase.PENDING, "Retrying"),
    Ending.RESTART: (JobPhase.PENDING, "Preempted"),
}


def on_event(core: Core, event: TaskEvent) -> None:
    """Apply one executor report. Reports about jobs or tasks no longer live are ignored.

    A task that is lost or could not start fails, and its job goes through ``fail``
    with the event's message (retried, or Failed once out of retries); one that was
    being stopped already ends as a stopped task does. Every edge is in the table.
    """
    job = core.jobs.get(event.job)
    task = None if job is None else _task(core, job, event.task)
    if job is None or task is None or task.status not in ON_NODE:
        return
    if event.kind is TaskEventKind.STARTED:
        if task.status is TaskStatus.BOUND:
            core.set_task(task, TaskPhase.RUNNING, at=event.time)
            start_ready(core, job)
        return
    if event.kind is TaskEventKind.EXITED and task.status is TaskStatus.BOUND:
        # It ran: its STARTED was not seen (reported before a crash of the server).
        core.set_task(task, TaskPhase.RUNNING)
    without_exit = event.kind in (TaskEventKind.LOST, TaskEventKind.FAILED_TO_START)
    if without_exit and task.status is not TaskStatus.RELEASING:
        # Bound or Running: the task failed (no edge leads back to Pending from there),
        # and its job retries or fails by its own rules.
        core.set_task(task, TaskPhase.FAILED)
        if job.ending is None:
            fail(core, job, _why_not_running(task.name, event))
    elif task.status is TaskStatus.RELEASING or event.stopped:
        stopped_for_good = job.ending in (Ending.CANCEL, Ending.WALLTIME, Ending.FAIL)
        core.set_task(
            task,
            TaskPhase.FAILED if stopped_for_good else TaskPhase.PENDING,
            exit_code=event.exit_code,
        )
    elif event.exit_code == 0:
        core.set_task(task, TaskPhase.SUCCEEDED, exit_code=0)
    else:
        core.set_task(task, TaskPhase.FAILED, exit_code=event.exit_code)
        if job.ending is None:
            why = f" ({event.reason})" if event.reason else ""
            if event.reason == OOM_KILLED:
                why = f" ({OOM_KILLED}: the kernel killed it for going over its memory limit)"
            fail(core, job, f"task {task.name} exited with code {event.exit_code}{why}")
    settle(core, job)


def _why_not_running(task: str, event: TaskEvent) -> str:
    if event.kind is TaskEventKind.FAILED_TO_START:
        return f"task {task} could not start: {event.message}"
    detail = f": {event.message}" if event.message else ""
    return f"task {task} was lost with its node {event.node}{detail}"


def fail(core: Core, job: Tracked, message: str) -> None:
    """A task failed or was lost: restart the whole gang, or fail the job when out of retries."""
    job.attempts += 1
    retry = job.attempts <= job.job.max_retry
    job.ending = Ending.RETRY if retry else Ending.FAIL
    job.ending_message = (
        f"{message}; retry {job.attempts} of {job.job.max_retry}"
        if retry
        else f"{message}; no retries left (maxRetry {job.job.max_retry})"
    )
    core.journal.job(job.id, attempts=job.attempts)
    core.journal.event(job.id, core.now, "TaskFailed", job.ending_message)
    core.stop(core.tasks(job), action="restart", by=job.name, reason=message)


def cancel(core: Core, job: Tracked, message: str) -> None:
    """Stop every task of ``job``; it becomes Cancelled once they have stopped."""
    if job.phase in TERMINAL or job.ending is Ending.CANCEL:
        return
    job.ending, job.ending_message = Ending.CANCEL, message
    core.stop(core.tasks(job), action="cancel", by=job.name, reason=message)
    settle(core, job)


def enforce_walltime(core: Core) -> float | None:
    """Stop jobs past their walltime; the earliest deadline still ahead, if any."""
    upcoming = None
    for job in list(core.jobs.values()):
        limit = job.job.walltime
        if limit is None or job.started_at is None or job.ending is not None:
            continue
        deadline = job.started_at + limit
        if core.now >= deadline:
            job.ending = Ending.WALLTIME
            job.ending_message = f"ran past its walltime of {limit:g} s"
            core.stop(core.tasks(job), action="walltime", by=job.name, reason=job.ending_message)
            settle(core, job)
        elif upcoming is None or deadline < upcoming:
            upcoming = deadline
    return upcoming


def restart_if_broken(core: Core, job: Tracked, reason: str) -> None:
    """After an eviction: a gang left below its minimum restarts whole (no retry spent)."""
    alive = [t for t in core.tasks(job) if t.status in (TaskStatus.BOUND, TaskStatus.RUNNING)]
    if job.ending is None and alive and len(alive) < core.state.job(job.name).min_available:
        job.ending, job.ending_message = Ending.RESTART, reason
        core.stop(alive, action="restart", by=job.name, reason=f"gang restart: {reason}")


def settle(core: Core, job: Tracked) -> None:
    """Once no task of ``job`` holds a node, decide what the job becomes."""
    tasks = core.tasks(job)
    if any(t.status in ON_NODE for t in tasks):
        return
    ending = job.ending
    if ending is None:
        if job.phase is JobPhase.RUNNING and any(t.status is TaskStatus.SUCCEEDED for t in tasks):
            core.set_phase(job, JobPhase.SUCCEEDED, "Completed", "every running task succeeded")
            forget(core, job)
        elif job.phase is JobPhase.RUNNING:
            core.set_phase(job, JobPhase.PENDING, "Preempted", "every task was evicted")
        return
    phase, reason = _SETTLED[ending]
    if phase is JobPhase.PENDING:
        for task in tasks:
            if task.status is not TaskStatus.PENDING:
                core.set_task(task, TaskPhase.PENDING)
        job.started_at = None
    core.set_phase(job, phase, reason, job.ending_message)
    job.ending, job.ending_message = None, ""
    if phase in TERMINAL:
        forget(core, job)
    elif ending is Ending.RETRY:
        delay = min(core.timing.backoff * 2 ** (job.attempts - 1), core.timing.max_backoff)
        job.not_before = core.now + delay
        core.journal.job(job.id, not_before=job.not_before)
        core.state.remove_job(job.name)
        job.in_state = False


def forget(core: Core, job: Tracked) -> None:
    """A job in a terminal phase leaves the controller's memory (its rows stay)."""
    if job.in_state:
        core.state.remove_job(job.name)
        job.in_state = False
    job.held.clear()
    core.jobs.pop(job.name, None)


def launch(core: Core, job: Tracked, binds: list[Bind]) -> None:
    """Start the bound tasks whose roles may start now; hold the others for ``dependsOn``."""
    for bind in binds:
        job.held[bind.task] = bind
    start_ready(core, job)


def start_ready(core: Core, job: Tracked) -> None:
    """Start every held task whose ``dependsOn`` roles are all Running."""
    if not job.held:
        return
    roles = {role.name: role for role in job.job.roles}
    running: dict[str, bool] = {}
    for task in core.tasks(job):
        running[task.role.name] = running.get(task.role.name, True) and (
            task.status is TaskStatus.RUNNING
        )
    ready = [
        bind
        for bind in job.held.values()
        if all(running.get(dep, False) for dep in roles[bind.role].depends_on)
    ]
    for bind in ready:
        del job.held[bind.task]
    core.start(ready)


def _task(core: Core, job: Tracked, name: str) -> TaskInfo | None:
    for task in core.tasks(job):
        if task.name == name:
            return task
    return None
