"""The local executor: every task is a process group on this host.

It implements ``phalanx.executors.base.Executor``. It starts processes, signals them and
reports what happened (STARTED, EXITED, LOST, FAILED_TO_START with a reason a person can
act on: ``phalanx.executors.failures``); it never decides what a job's state is. The
host-side work is the launcher's, a small process of its own whose children the tasks
are (``phalanx.executors.launcher``); this side plans each gang's rendezvous
(``gangs``), has each start's request built (``requests``: environment, limits, the
container runtime's client for an image) and keeps the books. ``start`` waits only for the launcher's
replies to its requests; ``poll`` never waits, and a stop only records when to escalate
to SIGKILL, which a later ``poll`` does.

Crash safety: ``records()`` is what a controller persists; after a restart a new
executor ``adopt``s them, and so does this one for the tasks of a launcher that died. See ``phalanx.executors.process`` for the exit-code wrapper
that makes an adopted task's exit code known although it is not our child.

Limits: ``isolation`` says what is enforced on this host (cgroup v2 or v1 groups per
task, or rlimits; ``phalanx.executors.cgroups``), and each task's record repeats it.
Under cgroups a task that requests no CPU or memory gets ``LimitDefaults``', an adopted
task keeps its group, every ended task's group is removed, and a task that fails after
the kernel OOM-killed a process in its group ends with reason ``OOM_KILLED``.

Identity: a launch's ``identity`` is the uid its task runs as; its directory and logs
are that uid's (``phalanx.executors.taskdirs``). With ``per_user`` every launch must
carry one: a launch without is FAILED_TO_START, never run as the server's own user.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import ServiceClass
from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import (
    COMMAND_NOT_EXECUTABLE,
    COMMAND_NOT_FOUND,
    OOM_KILLED,
    Executor,
    LogSource,
    LogStream,
    TaskEvent,
    TaskEventKind,
)
from phalanx.executors.cgroups import Isolation, IsolationKind, host_isolation
from phalanx.executors.containers import (
    ContainerRuntime,
    ContainerTask,
    detect_runtime,
)
from phalanx.executors.failures import failed_to_start, retriable, start_failure
from phalanx.executors.gangs import GangPlanner, PlannedStart
from phalanx.executors.gpuwatch import GpuWatch
from phalanx.executors.launch import TaskLaunch, check_directory_names
from phalanx.executors.launcher import Failed, LaunchedTask, Launcher
from phalanx.executors.launcher.client import LauncherGone
from phalanx.executors.logfiles import FileLog
from phalanx.executors.process import (
    STDERR_LOG,
    STDOUT_LOG,
    Exit,
    TaskProcess,
    attach,
    read_exit_code,
)
from phalanx.executors.records import ProcessRecord, read_record
from phalanx.executors.rendezvous import Placement, free_ports
from phalanx.executors.requests import Pending, Refusal, StartRequests
from phalanx.executors.taskdirs import RECORDS_DIR, TaskDirs
from phalanx.executors.taskenv import PROGRESS_NAME, read_report
from phalanx.executors.taskgroups import LimitDefaults, TaskGroup, TaskGroups, scope_of
from phalanx.telemetry.readings import NodeSample
from phalanx.tenantfs import Place, TenantPathRefused, read_tail

log = logging.getLogger(__name__)

#: The code reported for a task this executor killed when nothing else recorded one.
KILLED_CODE = 128 + 9

#: The message of the LOST that ``adopt`` reports for a task that ended unrecorded.
UNWATCHED_END = (
    "its process ended while no server watched it and left no exit code "
    "(killed by SIGKILL, or the host restarted)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningTask:
    """A read-only view of one live task (what colocation and the API look at)."""

    job: str
    task: str
    node: str
    pid: int
    workload: ServiceClass
    gpus: tuple[int, ...]
    paused: bool
    stopping: bool


@dataclass(slots=True, kw_only=True)
class _Live:
    """The executor's own state for one live task (mutable: deadlines, pause clock)."""

    job: str
    task: str
    node: str
    workload: ServiceClass
    gpus: tuple[int, ...]
    placement: Placement | None  # None when adopted: its peers' view is unknown
    process: TaskProcess | LaunchedTask | ContainerTask
    since: float  # when it started (or was adopted): no later event of it is earlier
    logs: str  # the directory its logs are written in (``ProcessRecord.logs``)
    endpoint: str  # where it is reached (``ProcessRecord.endpoint``)
    group: TaskGroup | None = None  # its cgroup, under cgroup isolation
    stop_deadline: float | None = None  # set by the first stop request
    killed: bool = False
    paused_since: float | None = None
    paused_total: float = 0.0


class LocalExecutor:
    """Runs bound tasks as local subprocesses and reports their events.

    ``resolve`` turns a ``Bind`` into a ``TaskLaunch`` (the controller knows the job's
    spec). Every task runs on this host, whatever node it was bound to, so every node's
    address is ``host`` (``address_of``): the rendezvous, ports included, stays on it.
    Not thread-safe: call it from one thread (the controller's loop), the colocation
    throttle included; ``logs`` and ``address_of`` excepted, which touch no state.
    ``clock`` only measures paused time and must tell the same time as the ``now`` the
    controller passes; events and stop deadlines use ``now``.
    ``environ`` is where the allow-listed inherited variables come from. ``isolation``
    defaults to the host's (``cgroups.host_isolation``, detected once per process).
    Tasks run in ``tasks_dir`` (default ``data_dir/tasks``; ``taskdirs`` for the layout),
    and the records of their processes are kept in ``data_dir/records``. ``per_user``
    refuses to start a launch without an identity; ``limits`` are the limits of a task
    that requests none (under cgroups). ``on_events`` is called, from another thread,
    when a task has ended (or the launcher has died): ``poll`` has news then. With
    ``tasks_die_with_it`` the tasks end when this executor's process does (or ``close``s):
    a Ray node's agent runs its executor so, and its tasks die with the node's Ray.
    ``containers`` runs the tasks of a role with an ``image`` (``containers``; by
    default the host's, ``containers.detect_runtime``; None: such tasks cannot start).
    ``gpus`` reads this host's cards on ``poll`` when a reading is due (``GpuSource``;
    None: never).
    """

    def __init__(
        self,
        data_dir: Path | str,
        resolve: Callable[[Bind], TaskLaunch],
        clock: Callable[[], float] = time.time,
        *,
        host: str = "127.0.0.1",
        environ: Mapping[str, str] | None = None,
        isolation: Isolation | None = None,
        tasks_dir: Path | str | None = None,
        per_user: bool = False,
        limits: LimitDefaults | None = None,
        on_events: Callable[[], object] | None = None,
        tasks_die_with_it: bool = False,
        containers: ContainerRuntime | Literal["detect"] | None = "detect",
        gpus: GpuWatch | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.gpus = gpus
        self.per_user = per_user
        self._dirs = TaskDirs(
            tasks_root=Path(tasks_dir) if tasks_dir is not None else self.data_dir / "tasks",
            records_root=self.data_dir / RECORDS_DIR,
        )
        self._resolve = resolve
        self._clock = clock
        self._host = host
        self._environ = dict(os.environ if environ is None else environ)
        self._live: dict[tuple[str, str], _Live] = {}
        self._gangs = GangPlanner(
            address_of=self.address_of, free_ports=lambda node, count: free_ports(count, host)
        )
        self._events: list[TaskEvent] = []
        self._launcher = Launcher(
            tasks_root=self._dirs.tasks_root,
            records_root=self._dirs.records_root,
            on_exit=on_events,
            clock=clock,
            tasks_die_with_it=tasks_die_with_it,
        )
        self._groups = TaskGroups(
            host_isolation() if isolation is None else isolation,
            scope=scope_of(self.data_dir),
            defaults=limits,
        )
        self._scope = scope_of(self.data_dir)
        self._containers = detect_runtime(self._environ) if containers == "detect" else containers
        self._requests = self._start_requests()

    def _start_requests(self) -> StartRequests:
        return StartRequests(
            dirs=self._dirs,
            groups=self._groups,
            environ=self._environ,
            per_user=self.per_user,
            containers=self._containers,
            scope=self._scope,
        )

    def reconfigure(self, *, per_user: bool, limits: LimitDefaults | None) -> None:
        """Start tasks from now on with ``per_user`` identities and ``limits`` (a restarted
        server's settings); the tasks running now go on as they are."""
        self.per_user = per_user
        self._groups.defaults = limits or LimitDefaults()
        self._requests = self._start_requests()

    # -- the Executor protocol ---------------------------------------------------------

    def start(self, binds: Sequence[Bind], *, now: float) -> None:
        """Start every bound task not already live; each queues STARTED or FAILED_TO_START.

        Never raises for a bad task or job: its trouble is its FAILED_TO_START, with the
        cause in the event's message, and the other jobs of the call start as if it
        were not there. A job's binds are all resolved before any of its processes
        starts, so a launch that cannot be made fails all of that job's tasks in this
        call and starts none. The rendezvous of a job covers its launches' ``gang``
        (when given), the tasks started in this call and its tasks live here.
        """
        by_job: dict[str, dict[str, Bind]] = {}
        for bind in binds:
            if (bind.job, bind.task) not in self._live:
                by_job.setdefault(bind.job, {}).setdefault(bind.task, bind)
        planned: list[PlannedStart] = []
        for job, group in by_job.items():
            try:
                launches = [self._resolved(bind) for bind in group.values()]
                planned.extend(self._gangs.plan(job, launches, self._live_placements(job)))
            except Exception as error:  # resolve or rendezvous
                if not any(live.job == job for live in self._live.values()):
                    self._gangs.forget(job)
                for bind in group.values():
                    if (bind.job, bind.task) in self._live:
                        continue
                    message = start_failure(error, workdir=self.workdir(job, bind.task))
                    log.warning("cannot start %s of %s: %s", bind.task, job, message)
                    self._events.append(
                        failed_to_start(bind.job, bind.task, bind.node, now, message)
                    )
        self.launch(planned, now=now)

    def launch(self, planned: Sequence[PlannedStart], *, now: float) -> None:
        """Start tasks whose rendezvous is planned already (``start`` plans its own; an
        executor for many machines plans a gang across nodes and hands each node its
        part). Each task not live yet queues STARTED or FAILED_TO_START; never raises."""
        pending = []
        for start in planned:
            if (start.launch.job, start.launch.task) in self._live:
                continue
            prepared = self._prepare(start.launch, start.placement, start.env, now)
            if prepared is not None:
                pending.append(prepared)
        self._launch(pending, now)

    def stop(self, evictions: Sequence[Evict], *, now: float, grace: float) -> None:
        """Send SIGTERM to each task's group; ``poll`` sends SIGKILL ``grace`` seconds later.

        A repeated request keeps the first deadline. A paused task is resumed, or the
        SIGTERM would wait until somebody did. Unknown tasks are ignored (already ended).
        """
        for eviction in evictions:
            live = self._live.get((eviction.job, eviction.task))
            if live is None or live.stop_deadline is not None:
                continue
            live.stop_deadline = now + max(0.0, grace)
            live.process.terminate()
            if live.paused_since is not None:
                self._unpause(live)

    def poll(self, *, now: float) -> list[TaskEvent]:
        """Reap ended tasks, SIGKILL those past their deadline; events up to ``now``, oldest first."""
        self._launcher.collect()
        self._readopt_orphans(now)
        for key, live in list(self._live.items()):
            ended = live.process.poll()
            if ended is not None:
                del self._live[key]
                oom = live.group is not None and self._groups.close(live.group)
                self._events.append(self._exited(live, ended, now, oom=oom))
                if not any(other.job == live.job for other in self._live.values()):
                    self._gangs.forget(live.job)
            elif live.stop_deadline is not None and now >= live.stop_deadline and not live.killed:
                live.killed = live.process.kill()
        self._groups.collect(keep={live.group for live in self._live.values() if live.group})
        if self.gpus is not None:
            self.gpus.tick(self.running(), now)
        due = sorted((event for event in self._events if event.time <= now), key=lambda e: e.time)
        self._events = [event for event in self._events if event.time > now]
        return due

    def gpu_samples(self) -> list[NodeSample]:
        """The readings of this host's cards since the last call (``GpuSource``)."""
        return [] if self.gpus is None else self.gpus.take()

    # -- crash safety --------------------------------------------------------------------

    def records(self) -> list[ProcessRecord]:
        """One record per live task, for the controller to persist (see ``adopt``)."""
        return [self._record_of(live) for live in self._live.values()]

    def recorded(self, job: str, task: str) -> ProcessRecord | None:
        """The record the last start of ``task`` left in the data dir (written before
        ``start`` returns, never where the task can write), for a controller that crashed
        before persisting it. None when there is none or it cannot be read."""
        return read_record(self._dirs.record(job, task))

    def adopt(self, records: Iterable[ProcessRecord], *, now: float) -> None:
        """Re-attach the recorded tasks that still run; report the others.

        A record is adopted when its pid is alive with the recorded start time (a
        reused pid is not). No STARTED is queued for it: it started long ago. Its group
        gets SIGCONT, because a task paused by the previous server would otherwise stay
        frozen with nobody left to resume it. A record whose process has ended queues
        EXITED with the code its wrapper wrote, or LOST when no code was written; under
        cgroup v2 an OOM kill in its group makes a failed one EXITED (``KILLED_CODE`` if
        no code) with reason ``OOM_KILLED``, and its group is removed.
        """
        for record in records:
            key = (record.job, record.task)
            if key in self._live:
                continue
            workdir = Path(record.workdir)
            group = self._groups.recorded(record.cgroup)
            attached = attach(pid=record.pid, start_time=record.start_time, workdir=workdir)
            process = None if attached is None else self._watched(attached, record.container)
            if process is None:
                code = read_exit_code(workdir, record.pid)
                if code is None and record.container:
                    code = self._leftover_code(record)
                oom = group is not None and self._groups.close(group)
                if oom and code is None:
                    code = KILLED_CODE
                self._events.append(
                    TaskEvent(
                        kind=TaskEventKind.LOST if code is None else TaskEventKind.EXITED,
                        time=now,
                        job=record.job,
                        task=record.task,
                        node=record.node,
                        exit_code=code,
                        reason=_exit_reason(oom, code),
                        message="" if code is not None else UNWATCHED_END,
                    )
                )
                continue
            process.resume()
            self._live[key] = _Live(
                job=record.job,
                task=record.task,
                node=record.node,
                workload=record.workload,
                gpus=record.gpus,
                placement=None,
                process=process,
                since=now,
                logs=record.log_dir,
                endpoint=record.endpoint,
                group=group,
            )

    # -- pausing (colocation) --------------------------------------------------------------

    def pause(self, job: str, task: str) -> bool:
        """Freeze a live task (SIGSTOP to its group). False for unknown or stopping tasks.

        A paused task is neither exited nor lost: ``poll`` reports nothing for it, and
        ``paused_seconds`` tells the controller how much of its run time to forgive.
        """
        live = self._live.get((job, task))
        if live is None or live.stop_deadline is not None:
            return False
        if live.paused_since is None and live.process.pause():
            live.paused_since = self._clock()
        return live.paused_since is not None

    def resume(self, job: str, task: str) -> bool:
        """Let a paused task run again (SIGCONT). False when it is unknown."""
        live = self._live.get((job, task))
        if live is None:
            return False
        if live.paused_since is not None:
            self._unpause(live)
        return True

    def is_paused(self, job: str, task: str) -> bool:
        """True while the task is paused by ``pause``."""
        live = self._live.get((job, task))
        return live is not None and live.paused_since is not None

    def paused_seconds(self, job: str, task: str) -> float:
        """Total time the task spent paused, the current pause included (0 if unknown)."""
        live = self._live.get((job, task))
        if live is None:
            return 0.0
        current = 0.0 if live.paused_since is None else self._clock() - live.paused_since
        return live.paused_total + current

    # -- views -------------------------------------------------------------------------------

    def running(self, workload: ServiceClass | None = None) -> list[RunningTask]:
        """The live tasks (of one workload class, if given), in start order."""
        return [
            RunningTask(
                job=live.job,
                task=live.task,
                node=live.node,
                pid=live.process.pid,
                workload=live.workload,
                gpus=live.gpus,
                paused=live.paused_since is not None,
                stopping=live.stop_deadline is not None,
            )
            for live in self._live.values()
            if workload is None or live.workload is workload
        ]

    @property
    def isolation(self) -> Isolation:
        """The limits this executor enforces on its tasks, and why (``describe()`` for people)."""
        return self._groups.isolation

    @property
    def limits(self) -> LimitDefaults:
        """The limits of a task that requests none, where cgroups enforce limits."""
        return self._groups.defaults

    @property
    def tasks_dir(self) -> Path:
        """The directory every task's working directory is in."""
        return self._dirs.tasks_root

    def workdir(self, job: str, task: str) -> Path:
        """Where the task runs and writes ``stdout.log`` and ``stderr.log``."""
        return self._dirs.workdir(job, task)

    def progress(self, job: str, task: str, limit: int) -> tuple[int, bytes] | None:
        """The task's progress report (``ProgressSource``): read without following a
        link and without blocking, since the task, not the server, owns the file."""
        return read_report(self.workdir(job, task) / PROGRESS_NAME, limit)

    def close(self) -> None:
        """Let go of what this executor holds on the host that nothing needs any more
        (its cgroup parents, when no task group is left in them). Tasks keep running."""
        self._launcher.close()
        self._groups.collect(keep={live.group for live in self._live.values() if live.group})
        self._groups.release()

    def address_of(self, node: str, declared: str | None) -> str:
        """The address peers reach a task on ``node`` at: always this executor's ``host``,
        since every task runs on this host. A declared address (``Node.address``) is not
        used: it may name another machine, where no port of ours can be opened."""
        return self._host

    def logs(self, job: str, task: str, stream: LogStream) -> FileLog:
        """The task's ``stdout.log`` or ``stderr.log`` in its working directory (every run
        appends there); when it is not there, its ``absent()`` reads the record of the
        task's last start to tell where that start wrote it. Only computes paths, so any
        thread may call it. Raises ``InvalidInput`` for a name that cannot name a task
        directory."""
        check_directory_names(job, task)
        file = STDOUT_LOG if stream is LogStream.STDOUT else STDERR_LOG
        return FileLog(
            path=self.workdir(job, task) / file,
            record=self._dirs.record(job, task),
            tasks_root=self.tasks_dir,
        )

    # -- internals ---------------------------------------------------------------------------

    def _resolved(self, bind: Bind) -> TaskLaunch:
        launch = self._resolve(bind)
        # Tasks are keyed by (job, task): a launch for another task would break idempotency.
        if (launch.job, launch.task, launch.node) != (bind.job, bind.task, bind.node):
            raise InvalidInput(
                f"resolve gave {launch.job}/{launch.task} on {launch.node} "
                f"for the bind of {bind.job}/{bind.task} on {bind.node}",
                field="resolve",
                fix="copy job, task and node from the Bind into the TaskLaunch",
            )
        return launch

    def _live_placements(self, job: str) -> dict[tuple[str, int], Placement]:
        return {
            (task.placement.role, task.placement.index): task.placement
            for task in self._live.values()
            if task.job == job and task.placement
        }

    def _prepare(
        self, launch: TaskLaunch, placement: Placement, injected: Mapping[str, str], now: float
    ) -> Pending | None:
        """The launcher's request for one task, or None (and its FAILED_TO_START queued)
        when it cannot start; never raises."""
        try:
            built = self._requests.build(launch, placement, injected, now=now)
        except Exception as error:
            self._cannot_start(launch, error, now)
            return None
        if isinstance(built, Refusal):
            self._events.append(
                failed_to_start(
                    launch.job,
                    launch.task,
                    launch.node,
                    now,
                    built.message,
                    retriable=built.retriable,
                )
            )
            return None
        return built

    def _watched(
        self, process: TaskProcess | LaunchedTask, container: str
    ) -> TaskProcess | LaunchedTask | ContainerTask:
        """``process``, or for a task in ``container`` a handle that kills it through the
        runtime (when the runtime is gone, the task's group is all there is to signal)."""
        if not container or self._containers is None:
            return process
        return ContainerTask(process, self._containers, container)

    def _leftover_code(self, record: ProcessRecord) -> int | None:
        """The exit code of the container of ``record``, whose wrapper ended unrecorded;
        what is left of it is removed (a running one too: nothing can watch it now)."""
        runtime = self._containers
        if runtime is None:
            return None
        found = runtime.find(self._scope, record.job, record.task)
        for container in found:
            runtime.remove(container.name)
        ended = [c.code for c in found if not c.running and c.code is not None]
        return ended[0] if ended else None

    def _launch(self, pending: Sequence[Pending], now: float) -> None:
        """Have the launcher start ``pending``; each gets its STARTED or FAILED_TO_START."""
        if not pending:
            return
        try:
            replies = self._launcher.start([item.request for item in pending])
        except LauncherGone as error:
            replies = [(Failed(id=item.request.id, error=error), now) for item in pending]
        orphans = []
        for item, answer in zip(pending, replies, strict=True):
            launch = item.launch
            if answer is None:  # the launcher died before answering: its record tells
                record = self.recorded(launch.job, launch.task)
                if record is None:
                    gone = LauncherGone("the server's task launcher ended before it ran")
                    self._cannot_start(launch, gone, now)
                    continue
                self._events.append(_started(launch, now))
                orphans.append((record, item.placement))
                continue
            reply, at = answer
            if isinstance(reply, Failed):
                self._cannot_start(launch, reply.error, now)
                continue
            process = self._watched(
                LaunchedTask(
                    self._launcher,
                    pid=reply.pid,
                    start_time=reply.start_time,
                    workdir=Path(item.request.record.workdir),  # where its exit_code is
                ),
                item.request.record.container,
            )
            group = item.request.group
            self._live[(launch.job, launch.task)] = _Live(
                job=launch.job,
                task=launch.task,
                node=launch.node,
                workload=launch.workload,
                gpus=launch.gpus,
                placement=item.placement,
                process=process,
                since=max(now, at),
                logs=item.request.record.logs,
                endpoint=item.request.record.endpoint,
                group=None if group is None else group.group,
            )
            # When the launcher answered: a batch of starts takes a while, and each
            # task's start is its own (never earlier than the call's ``now``).
            self._events.append(_started(launch, max(now, at)))
        self._adopt_placed(orphans, now)

    def _readopt_orphans(self, now: float) -> None:
        """Re-adopt the tasks of a launcher that died (as after a restart: ``adopt``)."""
        orphans = [
            (self._record_of(live), live.placement)
            for live in self._live.values()
            if isinstance(live.process, LaunchedTask | ContainerTask) and live.process.orphaned
        ]
        for record, _ in orphans:
            del self._live[record.job, record.task]
        self._adopt_placed(orphans, now)

    def _adopt_placed(
        self, orphans: Sequence[tuple[ProcessRecord, Placement | None]], now: float
    ) -> None:
        self.adopt([record for record, _ in orphans], now=now)
        for record, placement in orphans:
            live = self._live.get((record.job, record.task))
            if live is not None:
                live.placement = placement

    def _cannot_start(self, launch: TaskLaunch, error: BaseException, now: float) -> None:
        # The task cannot run (its environment is too big, the disk is full, ...);
        # the node is fine, so this is no LOST: the job retries or fails by its rules.
        workdir = self.workdir(launch.job, launch.task)
        if isinstance(error, LauncherGone):
            message = f"{error}: the job starts again by its retry rules"
        else:
            message = start_failure(error, workdir=workdir, identity=launch.identity)
        log.warning("cannot start %s of %s: %s", launch.task, launch.job, message)
        again = isinstance(error, LauncherGone) or retriable(error)
        self._events.append(
            failed_to_start(launch.job, launch.task, launch.node, now, message, retriable=again)
        )

    def _record_of(self, live: _Live) -> ProcessRecord:
        return ProcessRecord(
            job=live.job,
            task=live.task,
            node=live.node,
            pid=live.process.pid,
            start_time=live.process.start_time,
            workdir=str(live.process.workdir),
            workload=live.workload,
            gpus=live.gpus,
            isolation=IsolationKind.RLIMIT if live.group is None else self.isolation.kind,
            cgroup="" if live.group is None else str(live.group.path),
            container=live.process.name if isinstance(live.process, ContainerTask) else "",
            logs=live.logs,
            endpoint=live.endpoint,
        )

    def _unpause(self, live: _Live) -> None:
        live.process.resume()
        if live.paused_since is not None:
            live.paused_total += self._clock() - live.paused_since
            live.paused_since = None

    def _exited(self, live: _Live, ended: Exit, now: float, *, oom: bool) -> TaskEvent:
        """How ``live`` ended: EXITED with its code and why, or FAILED_TO_START for a
        container its runtime refused to start (never a success: nothing ran)."""
        refused = live.process.start_failure if isinstance(live.process, ContainerTask) else None
        if refused is not None and live.stop_deadline is None:
            stderr = self.workdir(live.job, live.task) / STDERR_LOG
            said = (
                _runtime_words(
                    Place(self._dirs.tasks_root, str(stderr.relative_to(self._dirs.tasks_root)))
                )
                or refused
            )
            message = f"the container runtime refused to start its container: {said}"
            at = max(now, live.since)
            return failed_to_start(live.job, live.task, live.node, at, message, retriable=False)
        code = ended.code
        if code is None and live.killed:
            code = KILLED_CODE  # we killed it; nothing else could tell us
        if live.paused_since is not None:
            # Died while frozen: close the pause clock, but send nothing, since the group
            # is reaped and its id may already be someone else's.
            live.paused_total += self._clock() - live.paused_since
            live.paused_since = None
        return TaskEvent(
            kind=TaskEventKind.EXITED,
            time=max(now, live.since),
            job=live.job,
            task=live.task,
            node=live.node,
            exit_code=code,
            stopped=live.stop_deadline is not None,
            reason=_exit_reason(oom, code)
            or (live.process.reason(code) if isinstance(live.process, ContainerTask) else None),
        )


#: The most of a task's ``stderr.log`` read for the runtime's words, from its end.
_RUNTIME_WORDS_MAX = 8192


def _runtime_words(log: Place) -> str | None:
    """The last error the runtime's client wrote (``Error: ...``) at the end of a
    task's ``stderr.log``, read through ``tenantfs`` (the task's own file: no link
    followed, no FIFO opened, at most ``_RUNTIME_WORDS_MAX`` bytes), if any."""
    try:
        tail = read_tail(log, reader=None, limit=_RUNTIME_WORDS_MAX)
    except (TenantPathRefused, OSError):
        return None
    said = [
        line for line in tail.decode(errors="replace").splitlines() if line.startswith("Error: ")
    ]
    return said[-1].removeprefix("Error: ").strip()[:1000] if said else None


def _exit_reason(oom: bool, code: int | None) -> str | None:
    """OOM_KILLED for a failure after an OOM kill (a task that succeeded although one of
    its processes was OOM-killed still succeeded), else what a shell's 127 or 126 says."""
    if oom and code != 0:
        return OOM_KILLED
    return {127: COMMAND_NOT_FOUND, 126: COMMAND_NOT_EXECUTABLE}.get(code or 0)


def _started(launch: TaskLaunch, now: float) -> TaskEvent:
    return TaskEvent(
        kind=TaskEventKind.STARTED, time=now, job=launch.job, task=launch.task, node=launch.node
    )


if TYPE_CHECKING:
    # mypy proves here that LocalExecutor satisfies the Executor protocol, signatures and all.
    _CONFORMS: type[Executor] = LocalExecutor
    _SERVES_LOGS: type[LogSource] = LocalExecutor
