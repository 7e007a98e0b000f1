"""The server's side of the launcher: ``Launcher`` starts it and talks to it.

Not thread-safe: one thread (the executor's caller) uses a ``Launcher``. Nothing here
waits except ``start``, which waits for the launcher's replies to its requests.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import subprocess
import sys
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

from phalanx.executors.launcher.messages import Exited, Failed, Signal, Start, Started
from phalanx.executors.process import Exit

log = logging.getLogger(__name__)

#: Requests sent ahead of their replies: enough to keep the launcher busy, few enough
#: that neither side's socket buffer fills while the other writes.
WINDOW: Final = 64
#: How long ``close`` waits for the launcher to exit.
CLOSE_TIMEOUT: Final = 5.0


class LauncherGone(RuntimeError):
    """The launcher process ended (or could not be started) under a live server."""


class Launcher:
    """One launcher process for one executor, started on first use (``start``).

    ``exits`` holds the ends the launcher reported, by wrapper pid and start time, until
    the task's handle takes them. ``alive`` is False once the launcher is found gone; a later
    ``start`` starts a new one.
    """

    def __init__(self, *, tasks_root: Path, records_root: Path) -> None:
        self._roots = (tasks_root, records_root)
        self._connection: Connection | None = None
        self._release: Callable[[], object] = lambda: None
        self._generation = 0
        self.exits: dict[tuple[int, float], int | None] = {}

    @property
    def generation(self) -> int:
        """Which launcher this is: 1 for the first one started, one more for each later."""
        return self._generation

    @property
    def alive(self) -> bool:
        """True while the current launcher answers (False before the first start)."""
        return self._connection is not None

    def start(self, requests: Sequence[Start]) -> list[Started | Failed | None]:
        """Send ``requests`` and wait for their replies, in order. A None reply means the
        launcher ended before answering: the task may or may not have started (its
        record, written before ``Started``, tells). Raises ``LauncherGone`` when no
        launcher can be started."""
        connection = self._connected()
        replies: dict[int, Started | Failed] = {}
        sent = 0
        try:
            while len(replies) < len(requests):
                while sent < len(requests) and sent - len(replies) < WINDOW:
                    connection.send(requests[sent])
                    sent += 1
                message = connection.recv()
                if isinstance(message, Exited):
                    self.exits[message.pid, message.start_time] = message.code
                else:
                    replies[message.id] = message
        except (EOFError, OSError):
            self._lost()
        return [replies.get(request.id) for request in requests]

    def signal(self, pid: int, start_time: float, signum: int) -> bool:
        """Ask the launcher to signal the group of the task ``pid`` (if not reaped yet).
        False when the task is known to have ended or the launcher is gone."""
        if (pid, start_time) in self.exits or self._connection is None:
            return False
        try:
            self._connection.send(Signal(pid=pid, signum=signum))
        except OSError:
            self._lost()
            return False
        return True

    def collect(self) -> None:
        """Take in every end the launcher reported so far (into ``exits``); never waits."""
        connection = self._connection
        if connection is None:
            return
        try:
            while connection.poll(0):
                message = connection.recv()
                if isinstance(message, Exited):
                    self.exits[message.pid, message.start_time] = message.code
        except (EOFError, OSError):
            self._lost()

    def close(self) -> None:
        """Let the launcher go (it exits; the tasks run on) and wait for it to exit."""
        self._release()
        self._connection = None

    def _connected(self) -> Connection:
        if self._connection is not None:
            return self._connection
        self.close()  # reap a launcher that died
        ours, theirs = socket.socketpair()
        module = "phalanx.executors.launcher"
        argv = [sys.executable, "-m", module, str(theirs.fileno()), *map(str, self._roots)]
        try:
            process = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            ours.close()
            raise LauncherGone(f"cannot start the launcher: {error}") from error
        finally:
            theirs.close()
        connection = Connection(ours.detach())
        # Also when the executor is dropped unclosed: the launcher must not outlive it.
        self._release = weakref.finalize(self, _let_go, process, connection)
        self._connection = connection
        self._generation += 1
        return connection

    def _lost(self) -> None:
        if self._connection is not None:
            log.error("the task launcher ended; its tasks are re-adopted")
            self.close()


def _let_go(process: subprocess.Popen[bytes], connection: Connection) -> None:
    """Close the launcher's socket (it exits on that) and reap it."""
    with contextlib.suppress(OSError):
        connection.close()
    try:
        process.wait(CLOSE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class LaunchedTask:
    """The server's handle on a task the launcher started: the same calls as a
    ``process.TaskProcess`` (signals go through the launcher, the end comes from it)."""

    __slots__ = ("_launcher", "generation", "pid", "start_time", "workdir")

    def __init__(self, launcher: Launcher, *, pid: int, start_time: float, workdir: Path) -> None:
        self._launcher = launcher
        self.generation = launcher.generation
        self.pid = pid
        self.start_time = start_time
        self.workdir = workdir

    @property
    def orphaned(self) -> bool:
        """True when the launcher that started it is gone: only re-adoption can watch it."""
        return not self._launcher.alive or self._launcher.generation != self.generation

    def send(self, signum: int) -> bool:
        """Send ``signum`` to the task's group; False when it is known to be gone."""
        return not self.orphaned and self._launcher.signal(self.pid, self.start_time, signum)

    def terminate(self) -> bool:
        """Ask the group to stop (SIGTERM)."""
        return self.send(signal.SIGTERM)

    def kill(self) -> bool:
        """Kill the group (SIGKILL)."""
        return self.send(signal.SIGKILL)

    def pause(self) -> bool:
        """Freeze the group (SIGSTOP)."""
        return self.send(signal.SIGSTOP)

    def resume(self) -> bool:
        """Let a frozen group run again (SIGCONT)."""
        return self.send(signal.SIGCONT)

    def poll(self) -> Exit | None:
        """The task's end once the launcher reported it (``Launcher.collect``), else None."""
        key = (self.pid, self.start_time)
        if key not in self._launcher.exits or self.orphaned:
            return None
        return Exit(self._launcher.exits.pop(key))
