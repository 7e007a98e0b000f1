"""The launcher process: ``python -m phalanx.executors.launcher FD TASKS_ROOT RECORDS_ROOT``.

``FD`` is its end of the socket pair the server made; ``TASKS_ROOT`` and ``RECORDS_ROOT``
are the executor's ``taskdirs.TaskDirs``. The main thread waits for a request or a
child's end (SIGCHLD, through the wakeup fd), hands each start to one of ``STARTERS``
threads, signals, and reports every ended task. A start waits for its wrapper's
``exec`` (``subprocess`` reports a failed one), which takes a scheduling round trip on a
busy host; with several starters those waits overlap. Replies go out as starts finish
(the server matches them by id). It runs in a session of its own, so a terminal's
Ctrl-C meant for the server does not reach it, and it exits when the server's end closes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

from phalanx.executors.cgroupfs import remove_group
from phalanx.executors.launcher.messages import Exited, Failed, Signal, Start, Started
from phalanx.executors.process import TaskProcess, spawn
from phalanx.executors.records import write_record
from phalanx.executors.taskdirs import TaskDirs, write_task_file

#: Threads that start tasks at once (see the module docstring).
STARTERS = 3
#: The option that makes the tasks end with the launcher's server (``main``).
TASKS_DIE_WITH_IT = "--tasks-die-with-it"


class Agent:
    """The launcher's state: the tasks it started and has not reaped, by wrapper pid.

    ``start`` runs on the starter threads, the rest on the main thread; ``lock`` guards
    ``live`` and the count of starts under way."""

    def __init__(self, dirs: TaskDirs) -> None:
        self.dirs = dirs
        self.live: dict[int, TaskProcess] = {}
        self.lock = threading.Lock()
        self._starting = 0

    def start(self, request: Start) -> Started | Failed:
        """Prepare the directory and its files, make the group, start the wrapper, write
        the record."""
        with self.lock:
            self._starting += 1
        try:
            return self._start(request)
        finally:
            with self.lock:
                self._starting -= 1

    def _start(self, request: Start) -> Started | Failed:
        group = None
        try:
            fresh = self.dirs.prepare(request.workdir, request.identity)
            for name, text in request.files.items():
                write_task_file(request.workdir, name, text, request.identity)
            group = request.group.create() if request.group is not None else None
            process = spawn(
                request.argv,
                workdir=request.workdir,
                env=request.env,
                cgroups=group.dirs if group is not None else (),
                identity=request.identity,
                memory_kib=request.memory_kib,
                fresh=fresh,
                exit_dir=Path(request.record.workdir) if request.client else None,
                as_server=request.client,
                attempt=request.attempt,
            )
        except Exception as error:
            if group is not None:
                for directory in group.dirs:
                    remove_group(directory)
            return Failed(id=request.id, error=_portable(error))
        with self.lock:
            self.live[process.pid] = process
        record = replace(request.record, pid=process.pid, start_time=process.start_time)
        write_record(self.dirs.record(record.job, record.task), record)
        return Started(id=request.id, pid=process.pid, start_time=process.start_time)

    def signal(self, request: Signal) -> None:
        """Signal the task's group, unless it was reaped (its pid may be anyone's now)."""
        with self.lock:
            process = self.live.get(request.pid)
        if process is not None:
            process.send(request.signum)

    def kill_all(self) -> None:
        """SIGKILL every live task's process group (the launcher is about to exit)."""
        with self.lock:
            live = list(self.live.values())
        for process in live:
            process.send(signal.SIGKILL)

    def reap(self) -> list[Exited]:
        """Every task whose wrapper has ended: leftovers killed, reaped, its code read.

        A child that is no known task while starts are under way is a start's own, not
        registered yet: it is left for the pass that start asks for once it is."""
        ended: list[Exited] = []
        while True:
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return ended
            if found is None:
                return ended
            with self.lock:
                process = self.live.pop(found.si_pid, None)
                starting = self._starting
            if process is None and starting:
                return ended
            if process is None:  # not a task (cannot happen): reap it all the same
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(found.si_pid, 0)
                continue
            exit_ = process.poll()
            ended.append(
                Exited(
                    pid=process.pid,
                    start_time=process.start_time,
                    code=None if exit_ is None else exit_.code,
                )
            )


def _portable(error: Exception) -> Exception:
    """``error`` as the server can unpickle it: an ``OSError`` or ``ValueError`` keeps its
    kind and fields (``failures.start_failure`` words them); anything else becomes a
    ``RuntimeError`` with its text."""
    if isinstance(error, OSError):
        return OSError(error.errno, error.strerror or str(error), error.filename)
    if isinstance(error, ValueError):
        return ValueError(str(error))
    return RuntimeError(f"{type(error).__name__}: {error}")


def serve(connection: Connection, agent: Agent) -> None:
    """Answer requests and report ends until the server's end of ``connection`` closes."""
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    selector = selectors.DefaultSelector()
    selector.register(connection.fileno(), selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    sending = threading.Lock()

    def send(message: object) -> None:
        with sending, contextlib.suppress(OSError):  # the server is gone: the loop ends
            connection.send(message)

    def start(request: Start) -> None:
        send(agent.start(request))
        with contextlib.suppress(BlockingIOError):
            os.write(wake_write, b".")  # a reap pass: its task may have ended already

    with ThreadPoolExecutor(STARTERS, thread_name_prefix="starter") as starters:
        while True:
            selector.select()
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_read, 4096):
                    pass
            try:
                while connection.poll(0):
                    request = connection.recv()
                    if isinstance(request, Start):
                        starters.submit(start, request)
                    elif isinstance(request, Signal):
                        agent.signal(request)
            except (EOFError, OSError):
                return  # the server is gone: the tasks run on, a new server re-adopts them
            for exited in agent.reap():
                send(exited)


def main(argv: list[str]) -> None:
    """The launcher's entry point (see the module docstring). With ``--tasks-die-with-it``
    after the three arguments, the tasks live no longer than their launcher's server:
    when its end closes, every live task's group is killed (``Agent.kill_all``); the
    launcher then runs as a grandchild of whoever started it, so that a parent that
    SIGKILLs its children on its way out (a Ray worker does) cannot take the launcher
    down before it has ended its tasks."""
    fd, tasks_root, records_root, *options = argv
    if TASKS_DIE_WITH_IT in options and os.fork() > 0:
        # The one who started it may SIGKILL its children as it exits (a Ray worker
        # does): a grandchild outlives that, sees the socket close, and ends its tasks.
        os._exit(0)
    dirs = TaskDirs(tasks_root=Path(tasks_root), records_root=Path(records_root))
    agent = Agent(dirs)
    serve(Connection(int(fd)), agent)
    if TASKS_DIE_WITH_IT in options:
        agent.kill_all()
