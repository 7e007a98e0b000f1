"""The launcher process: ``python -m phalanx.executors.launcher FD TASKS_ROOT RECORDS_ROOT``.

``FD`` is its end of the socket pair the server made; ``TASKS_ROOT`` and ``RECORDS_ROOT``
are the executor's ``taskdirs.TaskDirs``. One thread, one loop: it waits for a request
or a child's end (SIGCHLD, through the wakeup fd), answers every request in order, and
reports every ended task. It runs in a session of its own, so a terminal's Ctrl-C meant
for the server does not reach it, and it exits when the server's end closes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

from phalanx.executors.cgroupfs import remove_group
from phalanx.executors.launcher.messages import Exited, Failed, Signal, Start, Started
from phalanx.executors.process import TaskProcess, spawn
from phalanx.executors.records import write_record
from phalanx.executors.taskdirs import TaskDirs


class Agent:
    """The launcher's state: the tasks it started and has not reaped, by wrapper pid."""

    def __init__(self, dirs: TaskDirs) -> None:
        self.dirs = dirs
        self.live: dict[int, TaskProcess] = {}

    def start(self, request: Start) -> Started | Failed:
        """Prepare the directory, make the group, start the wrapper, write the record."""
        group = None
        try:
            fresh = self.dirs.prepare(request.workdir, request.identity)
            group = request.group.create() if request.group is not None else None
            process = spawn(
                request.argv,
                workdir=request.workdir,
                env=request.env,
                cgroups=group.dirs if group is not None else (),
                identity=request.identity,
                memory_kib=request.memory_kib,
                fresh=fresh,
            )
        except Exception as error:
            if group is not None:
                for directory in group.dirs:
                    remove_group(directory)
            return Failed(id=request.id, error=_portable(error))
        self.live[process.pid] = process
        record = replace(request.record, pid=process.pid, start_time=process.start_time)
        write_record(self.dirs.record(record.job, record.task), record)
        return Started(id=request.id, pid=process.pid, start_time=process.start_time)

    def signal(self, request: Signal) -> None:
        """Signal the task's group, unless it was reaped (its pid may be anyone's now)."""
        process = self.live.get(request.pid)
        if process is not None:
            process.send(request.signum)

    def reap(self) -> list[Exited]:
        """Every task whose wrapper has ended: leftovers killed, reaped, its code read."""
        ended: list[Exited] = []
        while True:
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return ended
            if found is None:
                return ended
            process = self.live.pop(found.si_pid, None)
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
    while True:
        selector.select()
        with contextlib.suppress(BlockingIOError):
            while os.read(wake_read, 4096):
                pass
        try:
            while connection.poll(0):
                request = connection.recv()
                if isinstance(request, Start):
                    connection.send(agent.start(request))
                elif isinstance(request, Signal):
                    agent.signal(request)
            for exited in agent.reap():
                connection.send(exited)
        except (EOFError, OSError):
            return  # the server is gone: the tasks run on, a new server re-adopts them


def main(argv: list[str]) -> None:
    """The launcher's entry point (see the module docstring)."""
    fd, tasks_root, records_root = argv
    dirs = TaskDirs(tasks_root=Path(tasks_root), records_root=Path(records_root))
    serve(Connection(int(fd)), Agent(dirs))
